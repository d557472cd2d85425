#include "order/block_order.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "dataset/shards.hpp"

namespace a2pack::order {

namespace {

// Window w's shards: plan positions [w * window, min(shards, (w + 1) * window)).
std::pair<size_t, size_t> window_span(const dataset::BlockPlan& p, size_t w, uint32_t window) {
  const size_t a = w * window;
  return {a, std::min(p.shards.size(), a + window)};
}

constexpr size_t kCached = 4;

}  // namespace

BlockOrder::BlockOrder(dataset::BlockSampler sampler, uint64_t first_epoch, size_t first_shards)
    : s_(std::move(sampler)),
      first_epoch_(first_epoch),
      first_shards_(std::min(first_shards, s_.shard_count())) {}

std::unique_ptr<BlockOrder> BlockOrder::of(const dataset::ShardCache& shards, uint32_t window,
                                           uint64_t seed, size_t batch, uint32_t rank,
                                           uint32_t world, bool drop_last) {
  const auto layout = shards.layout();
  return over(*layout, layout->manifest.rows, shards.window_for(window), seed, batch, rank, world,
              drop_last);
}

std::unique_ptr<BlockOrder> BlockOrder::over(const dataset::ShardCache::Layout& layout,
                                             uint64_t rows, uint32_t window, uint64_t seed,
                                             size_t batch, uint32_t rank, uint32_t world,
                                             bool drop_last) {
  const size_t count = dataset::shards_ending_at(layout.manifest.shards, rows);
  if (count == SIZE_MAX)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: no shard of the dataset ends at row {} (its {} shards hold {} rows): a state of "
         "a feed over other shards",
         rows, layout.shards(), layout.manifest.rows);
  std::vector<uint64_t> counts, firsts;
  for (size_t i = 0; i < count; ++i) {
    counts.push_back(layout.manifest.shards[i].rows);
    firsts.push_back(layout.manifest.shards[i].first_row);
  }
  return std::make_unique<BlockOrder>(dataset::BlockSampler(std::move(counts), std::move(firsts),
                                                            seed, batch, rank, world, window,
                                                            drop_last));
}

std::shared_ptr<const dataset::BlockPlan> BlockOrder::plan(uint64_t epoch) const {
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& p : plans_)
      if (p->epoch == epoch) return p;
  }
  // O(shards): made outside the lock; two threads may both make it.
  auto p = std::make_shared<const dataset::BlockPlan>(s_.plan(epoch, shards_of(epoch)));
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& q : plans_)
    if (q->epoch == epoch) return q;
  plans_.push_back(p);
  if (plans_.size() > kCached) plans_.erase(plans_.begin());
  return p;
}

uint64_t BlockOrder::sequence(Position p) const {
  // Epochs may differ in length (the deal changes); counted from the
  // shard-count change, which is where a resumed feed's sequence starts.
  uint64_t n = p.batch;
  for (uint64_t e = first_epoch_; e < p.epoch; ++e) n += plan(e)->batches;
  return n;
}

std::shared_ptr<const std::vector<uint32_t>> BlockOrder::window_order(const dataset::BlockPlan& p,
                                                                      size_t w) const {
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& o : orders_)
      if (o.epoch == p.epoch && o.shards == p.shards.size() && o.w == w) return o.perm;
  }
  // O(rows of the window): made outside the lock.
  auto perm = std::make_shared<const std::vector<uint32_t>>(s_.window_order(p, w));
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& o : orders_)
    if (o.epoch == p.epoch && o.shards == p.shards.size() && o.w == w) return o.perm;
  orders_.push_back({p.epoch, p.shards.size(), w, perm});
  if (orders_.size() > kCached) orders_.erase(orders_.begin());
  return perm;
}

size_t BlockOrder::fill(Position pos, Out& o) const {
  int64_t* out = o.indices;
  const auto plan_ptr = plan(pos.epoch);
  const dataset::BlockPlan& p = *plan_ptr;
  if (pos.batch >= p.batches)
    fail(A2PACK_E_OUT_OF_RANGE, "block order: batch {} of epoch {}, which has {}", pos.batch,
         pos.epoch, p.batches);
  const uint64_t bs = s_.batch_size();
  const uint64_t a = pos.batch * bs, b = std::min(a + bs, p.stream_end);
  // With several ranks every one takes full batches; alone the last may be short.
  o.global_rows = (b - a) * s_.world();
  std::vector<uint64_t> starts;
  uint64_t at = a;
  while (at < b) {
    const size_t w = dataset::BlockSampler::window_of(p, at);
    const auto perm = window_order(p, w);
    auto [c, d] = window_span(p, w, s_.window());
    starts.assign(1, 0);
    for (size_t j = c; j < d; ++j) starts.push_back(starts.back() + s_.shard_rows(p.shards[j]));
    const uint64_t w0 = p.window_pos[w], end = std::min(b, p.window_pos[w + 1]);
    for (; at < end; ++at) {
      const uint64_t pp = (*perm)[at - w0];
      const size_t j =
          static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), pp) - starts.begin()) -
          1;
      out[at - a] = static_cast<int64_t>(s_.first_row(p.shards[c + j]) + (pp - starts[j]));
    }
  }
  return static_cast<size_t>(b - a);
}

void BlockOrder::add_spans(const dataset::BlockPlan& p, size_t w,
                           std::vector<RowSpan>* out) const {
  auto [c, d] = window_span(p, w, s_.window());
  for (size_t j = c; j < d; ++j)
    out->push_back({s_.first_row(p.shards[j]), s_.shard_rows(p.shards[j])});
}

Residency BlockOrder::residency(Position pos) const {
  Residency r;
  const auto plan_ptr = plan(pos.epoch);
  const dataset::BlockPlan& p = *plan_ptr;
  if (pos.batch >= p.batches || p.windows() == 0) return r;
  const uint64_t bs = s_.batch_size();
  const uint64_t a = pos.batch * bs, b = std::min(a + bs, p.stream_end);
  const size_t wa = dataset::BlockSampler::window_of(p, a);
  const size_t wb = dataset::BlockSampler::window_of(p, b - 1);
  for (size_t w = wa; w <= wb; ++w) add_spans(p, w, &r.now);
  if (wb + 1 < p.windows()) {
    add_spans(p, wb + 1, &r.next);
  } else {
    const auto np = plan(pos.epoch + 1);
    if (np->windows() > 0) add_spans(*np, 0, &r.next);
  }
  return r;
}

std::string BlockOrder::save_state(Position next) const {
  return s_.save_state(next.epoch, next.batch, shards_of(next.epoch));
}

std::unique_ptr<Order> BlockOrder::load_state(const void* data, size_t len, Position* next) const {
  const auto at = s_.load_state(data, len);
  *next = {at.epoch, at.next_batch};
  auto o = std::make_unique<BlockOrder>(s_, at.epoch, at.shards);
  o->helper_entry_ = helper_entry_;
  return o;
}

}  // namespace a2pack::order
