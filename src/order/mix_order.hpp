// A mixing sampler's weighted global batches (dataset/mix_sampler.hpp) as
// one endless epoch: position (0, b) is the mix's batch b, rank r of
// `world` taking its contiguous part of it.
#pragma once

#include <mutex>

#include "dataset/mix_sampler.hpp"
#include "order/order.hpp"

namespace a2pack::order {

class MixOrder final : public Order {
 public:
  MixOrder(const dataset::MixSampler& mix, uint32_t rank, uint32_t world);

  Kind kind() const override { return Kind::kMix; }
  std::string describe() const override { return "a mixing sampler"; }
  uint64_t batches_in(uint64_t) const override { return kEndless; }
  uint64_t sequence(Position p) const override { return p.batch; }
  size_t max_rows() const override { return (mix_.batch_size() + world_ - 1) / world_; }
  size_t fill(Position p, Out& out) const override;
  uint64_t seed() const override { return mix_.seed(); }
  std::string save_state(Position next) const override;
  std::unique_ptr<Order> load_state(const void* data, size_t len, Position* next) const override;

  // A copy that mixes with `weights` from batch `from` on (refused weights
  // throw, changing nothing).
  std::unique_ptr<MixOrder> with_weights(const std::vector<double>& weights, uint64_t from) const;
  const dataset::MixSampler& mix() const { return mix_; }

 private:
  std::unique_ptr<MixOrder> copy() const;  // taken under the lock
  // fill_part uses the sampler's scratch space: one fill at a time.
  mutable std::mutex mu_;
  mutable dataset::MixSampler mix_;
  uint32_t rank_, world_;
};

}  // namespace a2pack::order
