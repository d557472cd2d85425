#include "order/mix_order.hpp"

namespace a2pack::order {

MixOrder::MixOrder(const dataset::MixSampler& mix, uint32_t rank, uint32_t world)
    : mix_(mix), rank_(rank), world_(world) {}

size_t MixOrder::fill(Position p, Out& out) const {
  out.global_rows = mix_.batch_size();
  std::lock_guard<std::mutex> lk(mu_);
  return mix_.fill_part(p.batch, rank_, world_, out.indices, nullptr);
}

std::string MixOrder::save_state(Position next) const {
  std::lock_guard<std::mutex> lk(mu_);
  return mix_.save_state(next.batch);
}

std::unique_ptr<MixOrder> MixOrder::copy() const {
  std::lock_guard<std::mutex> lk(mu_);
  return std::make_unique<MixOrder>(mix_, rank_, world_);
}

std::unique_ptr<Order> MixOrder::load_state(const void* data, size_t len, Position* next) const {
  auto o = copy();
  *next = {0, o->mix_.load_state(data, len)};  // adopts the state's seed and weights
  return o;
}

std::unique_ptr<MixOrder> MixOrder::with_weights(const std::vector<double>& weights,
                                                 uint64_t from) const {
  auto o = copy();
  o->mix_.set_weights(weights, from);
  return o;
}

}  // namespace a2pack::order
