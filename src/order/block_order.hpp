// A sharded dataset's block shuffle (dataset/block_sampler.hpp) as an
// order: each epoch the shards are dealt out to the ranks, and a rank reads
// its shards a window at a time, each window's rows in a seeded random
// order. A rank's batch b is positions [b * B, (b + 1) * B) of its stream
// (B: the global batch size over the ranks), so every batch is drawn from
// at most two windows, and residency() names them and the next one.
#pragma once

#include <mutex>

#include "dataset/block_sampler.hpp"
#include "dataset/shard_cache.hpp"
#include "order/order.hpp"

namespace a2pack::order {

class BlockOrder final : public Order {
 public:
  // `sampler` per rank (its batch size is the rank's share of a global
  // batch); shards appended after a state was taken join at the next epoch:
  // epoch `first_epoch` covers its first `first_shards` shards.
  explicit BlockOrder(dataset::BlockSampler sampler, uint64_t first_epoch = 0,
                      size_t first_shards = SIZE_MAX);

  Kind kind() const override { return Kind::kBlocks; }
  std::string describe() const override { return "a block shuffle of shards"; }
  uint64_t batches_in(uint64_t epoch) const override { return plan(epoch)->batches; }
  uint64_t sequence(Position p) const override;
  size_t max_rows() const override { return s_.batch_size(); }
  size_t fill(Position p, Out& out) const override;
  Residency residency(Position p) const override;
  uint64_t seed() const override { return s_.seed(); }
  std::string save_state(Position next) const override;
  std::unique_ptr<Order> load_state(const void* data, size_t len, Position* next) const override;

  // The block shuffle of `shards`' dataset: `window` shards per window (0:
  // as many as half its budget holds), `batch` rows per rank.
  static std::unique_ptr<BlockOrder> of(const dataset::ShardCache& shards, uint32_t window,
                                        uint64_t seed, size_t batch, uint32_t rank,
                                        uint32_t world, bool drop_last);
  // The block shuffle of the shards of `layout` that hold its first `rows`
  // rows (a live feed's generation; fails unless a shard ends there):
  // `window` shards per window (as resolved by the cache), `batch` rows per
  // rank.
  static std::unique_ptr<BlockOrder> over(const dataset::ShardCache::Layout& layout,
                                          uint64_t rows, uint32_t window, uint64_t seed,
                                          size_t batch, uint32_t rank, uint32_t world,
                                          bool drop_last);

  const dataset::BlockSampler& sampler() const { return s_; }
  std::shared_ptr<const dataset::BlockPlan> plan(uint64_t epoch) const;

 private:
  size_t shards_of(uint64_t epoch) const {
    return epoch == first_epoch_ ? first_shards_ : s_.shard_count();
  }
  // Window w of `p`'s rows in their random order (cached: a few windows).
  std::shared_ptr<const std::vector<uint32_t>> window_order(const dataset::BlockPlan& p,
                                                            size_t w) const;
  void add_spans(const dataset::BlockPlan& p, size_t w, std::vector<RowSpan>* out) const;

  dataset::BlockSampler s_;
  uint64_t first_epoch_;
  size_t first_shards_;
  struct CachedOrder {
    uint64_t epoch;
    size_t shards, w;
    std::shared_ptr<const std::vector<uint32_t>> perm;
  };
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<const dataset::BlockPlan>> plans_;  // the newest few
  mutable std::vector<CachedOrder> orders_;                                // the newest few
};

}  // namespace a2pack::order
