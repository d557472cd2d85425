// Reading a sharded dataset larger than RAM one batch at a time, on the
// caller's thread (docs/dataset.md, "Reading a dataset larger than RAM"):
// the block shuffle (order/block_order.hpp) over shards kept resident
// within a budget (dataset/shard_cache.hpp), whose background thread loads
// the next window's shards while the current one is read. A training feed
// over the same shards and order (a2pack_feed_open_shards) adds the ring,
// producers and checkpoints of every feed; this stream is the same order
// without them.
//
// One thread at a time may call a stream's methods. A process forked from
// the one that opened a stream cannot use it: next() and the other calls
// that read fail naming this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataset/block_sampler.hpp"
#include "dataset/columns.hpp"
#include "dataset/manifest.hpp"
#include "dataset/shard_cache.hpp"
#include "feed/rows.hpp"

namespace a2pack::order {
class BlockOrder;
}

namespace a2pack::feed {

using dataset::BlockPlan;
using dataset::BlockSampler;
using dataset::ColumnsOut;
using dataset::Manifest;
using dataset::ShardCache;
using dataset::ShardCacheOptions;
using dataset::ShardCacheStats;


struct ShardStreamOptions {
  uint64_t budget_bytes = uint64_t{1} << 30;  // RAM for resident shards
  size_t batch_size = 4096;
  uint64_t seed = 0;                          // the same on every rank
  uint32_t rank = 0, world = 1;
  uint32_t window = 0;     // shards per window; 0: as many as half the budget holds
  bool drop_last = false;  // one rank: drop an epoch's short last batch
  bool verify_crc = true;  // check each shard against the manifest as it is loaded
  bool prefetch = true;    // load the next window's shards on a background thread
  bool huge_pages = true;
};

struct ShardStreamStats {
  uint64_t batches = 0;         // handed out
  uint64_t loads = 0;           // shards read from disk
  uint64_t evictions = 0;       // shards dropped to stay within the budget
  uint64_t bytes_read = 0;
  uint64_t resident_bytes = 0;  // now
  uint64_t resident_shards = 0;
  double load_wait_s = 0;       // the consumer waited for shards
  double load_s = 0;            // spent loading, on either thread
};

class ShardStream {
 public:
  // Opens a sharded dataset (a single-file one is read as one shard). Fails
  // when the budget cannot hold two windows of the largest shard.
  static std::unique_ptr<ShardStream> open(const std::string& dir, const ShardStreamOptions& o);
  ~ShardStream();
  ShardStream(const ShardStream&) = delete;
  ShardStream& operator=(const ShardStream&) = delete;

  Manifest manifest() const { return cache_->manifest(); }
  const BlockSampler& sampler() const;
  const BlockPlan& plan() const { return *plan_; }
  uint64_t epoch() const { return epoch_; }
  uint64_t next_batch() const { return next_batch_; }
  uint64_t max_shard_bytes() const { return cache_->max_shard_bytes(); }

  // Start epoch e at its first batch.
  void set_epoch(uint64_t e);
  // Gather the next batch into `out` (and its global row indices into idx,
  // when not null): its length, at most batch_size. At the end of an epoch
  // it returns 0 once and moves to the next epoch's first batch.
  size_t next(const ColumnsOut& out, int64_t* idx);
  // Global row indices of batch b of the current epoch, without loading
  // anything: its length (0 past the epoch's batches).
  size_t batch_indices(uint64_t b, int64_t* out);

  std::string save_state() const;
  void load_state(const void* data, size_t len);
  ShardStreamStats stats() const;

 private:
  ShardStream(std::shared_ptr<const ShardCache> cache, std::unique_ptr<order::BlockOrder> order);
  void start_epoch(uint64_t e, uint64_t next_batch);

  std::shared_ptr<const ShardCache> cache_;
  std::shared_ptr<const Rows> rows_;  // the cache, as the feed reads it
  std::unique_ptr<order::BlockOrder> order_;
  std::shared_ptr<const BlockPlan> plan_;
  uint64_t epoch_ = 0, next_batch_ = 0, batches_ = 0, batches_served_ = 0;
  std::vector<int64_t> idx_;
};

}  // namespace a2pack::feed
