#include "feed/shard_stream.hpp"

#include "base/error.hpp"
#include "order/block_order.hpp"

namespace a2pack::feed {

std::unique_ptr<ShardStream> ShardStream::open(const std::string& dir,
                                               const ShardStreamOptions& o) {
  ShardCacheOptions co;
  co.budget_bytes = o.budget_bytes;
  co.verify_crc = o.verify_crc;
  co.prefetch = o.prefetch;
  co.huge_pages = o.huge_pages;
  std::shared_ptr<const ShardCache> cache = ShardCache::open(dir, co);
  auto order = order::BlockOrder::of(*cache, o.window, o.seed, o.batch_size, o.rank, o.world,
                                     o.drop_last);
  return std::unique_ptr<ShardStream>(new ShardStream(std::move(cache), std::move(order)));
}

ShardStream::ShardStream(std::shared_ptr<const ShardCache> cache,
                         std::unique_ptr<order::BlockOrder> order)
    : cache_(cache), rows_(shard_rows(std::move(cache))), order_(std::move(order)) {
  start_epoch(0, 0);
}

ShardStream::~ShardStream() = default;

const BlockSampler& ShardStream::sampler() const { return order_->sampler(); }

void ShardStream::start_epoch(uint64_t e, uint64_t next_batch) {
  plan_ = order_->plan(e);
  epoch_ = e;
  next_batch_ = next_batch;
  batches_ = plan_->batches;
}

void ShardStream::set_epoch(uint64_t e) { start_epoch(e, 0); }

size_t ShardStream::next(const ColumnsOut& out, int64_t* idx) {
  if (next_batch_ >= batches_) {
    start_epoch(epoch_ + 1, 0);
    return 0;
  }
  const order::Position p{epoch_, next_batch_};
  idx_.resize(order_->max_rows());
  order::Out o;
  o.indices = idx_.data();
  const size_t n = order_->fill(p, o);
  rows_->want(order_->residency(p));
  rows_->gather(idx_.data(), n, out, 1);
  if (idx) std::copy(idx_.begin(), idx_.begin() + static_cast<std::ptrdiff_t>(n), idx);
  ++next_batch_;
  ++batches_served_;
  return n;
}

size_t ShardStream::batch_indices(uint64_t b, int64_t* out) {
  if (b >= batches_) return 0;
  order::Out o;
  o.indices = out;
  return order_->fill({epoch_, b}, o);
}

std::string ShardStream::save_state() const {
  return order_->save_state({epoch_, next_batch_});
}

void ShardStream::load_state(const void* data, size_t len) {
  order::Position at;
  auto o = order_->load_state(data, len, &at);
  order_.reset(static_cast<order::BlockOrder*>(o.release()));
  start_epoch(at.epoch, at.batch);
}

ShardStreamStats ShardStream::stats() const {
  const ShardCacheStats c = cache_->stats();
  ShardStreamStats s;
  s.batches = batches_served_;
  s.loads = c.loads;
  s.evictions = c.evictions;
  s.bytes_read = c.bytes_read;
  s.resident_bytes = c.resident_bytes;
  s.resident_shards = c.resident_shards;
  s.load_wait_s = c.load_wait_s;
  s.load_s = c.load_s;
  return s;
}

}  // namespace a2pack::feed
