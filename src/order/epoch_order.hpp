// Epochs of a selection of rows: each epoch every row once, shuffled by
// (seed, epoch) with the index shuffle or a stored permutation, or in the
// order given; rank r of `world` takes its contiguous part of every global
// batch (dataset/sampler.hpp).
//
// A stored permutation is O(n) to make, so the next epoch's is made ahead
// on a helper thread while the current one is served, and at most three are
// kept (the newest, the current one and the one before, whose last batches
// may still be filling). The index shuffle needs none of this.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "dataset/sampler.hpp"
#include "order/order.hpp"

namespace a2pack::order {

class EpochOrder final : public Order {
 public:
  struct Options {
    uint64_t batch_size = 4096, seed = 0;
    bool shuffle = true;
    dataset::Shuffle shuffle_kind = dataset::Shuffle::kIndex;
    bool drop_last = false;
    uint32_t rank = 0, world = 1;
  };
  // Over `indices`, or every row of `rows` when `all_rows`. Fails for an
  // empty selection or one that makes no batch.
  EpochOrder(std::vector<int64_t> indices, bool all_rows, uint64_t rows, const Options& o);
  ~EpochOrder() override;

  Kind kind() const override { return Kind::kEpoch; }
  std::string describe() const override { return "an epoch sampler"; }
  uint32_t state_flags() const override { return o_.shuffle ? 1u : 0u; }
  uint64_t batches_in(uint64_t) const override { return batch_count_; }
  uint64_t sequence(Position p) const override { return p.epoch * batch_count_ + p.batch; }
  size_t max_rows() const override;
  size_t max_rows_any() const override {
    return static_cast<size_t>((o_.batch_size + o_.world - 1) / o_.world);
  }
  size_t fill(Position p, Out& out) const override;
  uint64_t seed() const override { return base_.seed(); }
  void restart(Position p) override;
  void stop() override;
  std::string save_state(Position next) const override;
  std::unique_ptr<Order> load_state(const void* data, size_t len, Position* next) const override;

  // The feed ends before this epoch (0: never); it makes no epoch ahead past it.
  void set_epoch_limit(uint64_t epochs) { epochs_limit_ = epochs; }

 private:
  EpochOrder(const EpochOrder& o, dataset::Sampler base);
  std::shared_ptr<const dataset::Sampler> sampler_for(uint64_t epoch) const;
  std::shared_ptr<const dataset::Sampler> make_epoch(uint64_t epoch) const;
  void prepare(uint64_t epoch) const;  // mu_ held
  void add_epoch(std::shared_ptr<const dataset::Sampler> s) const;  // mu_ held
  void keep_epochs_up_to(uint64_t newest) const;                    // mu_ held

  Options o_;
  bool all_rows_;
  uint64_t epochs_limit_ = 0;
  // The template the epochs' samplers are copied from: the selection, seed
  // and batches, no permutation.
  dataset::Sampler base_;
  uint64_t batch_count_ = 0;

  // The epochs' samplers (the newest few) and the one being made ahead.
  mutable std::mutex mu_;
  mutable std::condition_variable made_;  // an epoch's sampler was made (or failed)
  mutable std::vector<std::shared_ptr<const dataset::Sampler>> epochs_;
  mutable std::vector<uint64_t> building_;
  mutable std::thread prep_;
  mutable bool prep_done_ = true;
  mutable bool stopped_ = false;
};

}  // namespace a2pack::order
