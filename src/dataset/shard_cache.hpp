// A sharded dataset's rows, whole shards at a time within a memory budget
// (docs/dataset.md, "Reading a dataset larger than RAM"): a gather loads
// the shards it reads when they are not resident, the least recently used
// unpinned shard goes when the budget is full, and a background thread
// loads ahead the shards the caller says come next (want()). Any number of
// threads may gather at once: each pins one shard at a time while copying
// its rows, so a gather never waits while holding a pin and the budget
// (at least two of the largest shard) always lets one of them go on.
//
// A process forked from the one that made the cache cannot use it (its
// loader thread is not there): gathers fail naming this, and destroying it
// there frees nothing the parent owns.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dataset/columns.hpp"
#include "dataset/manifest.hpp"
#include "dataset/memory.hpp"

namespace a2pack::dataset {

struct ShardCacheOptions {
  uint64_t budget_bytes = uint64_t{1} << 30;
  bool verify_crc = true;  // check each shard against the manifest as it is loaded
  bool prefetch = true;    // load want()'s next shards on a background thread
  bool huge_pages = true;
};

struct ShardCacheStats {
  uint64_t loads = 0, evictions = 0, bytes_read = 0;
  uint64_t resident_bytes = 0, resident_shards = 0;  // now
  double load_wait_s = 0;  // gathers waited for shards
  double load_s = 0;       // spent loading, on any thread
};

// Global rows [first, first + count) (order/order.hpp's RowSpan, kept apart
// so the dataset does not depend on the feed's orders).
struct RowSpanRef {
  uint64_t first = 0, count = 0;
};

class ShardCache {
 public:
  // The shards the cache reads: its manifest (a single-file dataset as one
  // shard), each shard's first global row. Replaced whole when the dataset
  // grows (grow()); a holder of one keeps reading the shards it names.
  struct Layout {
    Manifest manifest;
    std::vector<uint64_t> firsts;
    uint64_t max_shard_bytes = 0;
    size_t shards() const { return manifest.shards.size(); }
  };

  // Reads the manifest of `dir` (a single-file dataset is one shard).
  // Fails for a dataset without rows or a budget that cannot hold two of
  // its largest shard.
  static std::unique_ptr<ShardCache> open(const std::string& dir, const ShardCacheOptions& o);
  ~ShardCache();
  ShardCache(const ShardCache&) = delete;
  ShardCache& operator=(const ShardCache&) = delete;

  const std::string& dir() const { return dir_; }
  std::shared_ptr<const Layout> layout() const;
  Manifest manifest() const { return layout()->manifest; }
  uint64_t rows() const { return rows_.load(std::memory_order_acquire); }
  uint64_t budget_bytes() const { return o_.budget_bytes; }
  uint64_t max_shard_bytes() const { return layout()->max_shard_bytes; }
  // Shards per window of a block shuffle: `requested`, or when 0 as many as
  // half the budget holds (two windows are resident at once). Fails for a
  // window the budget cannot hold twice.
  uint32_t window_for(uint32_t requested) const;

  // Takes in the shards a committed append added (a sharded append never
  // touches a shard it did not write): `next`, as read_manifest read it,
  // must list this cache's shards first, unchanged, and windows of `window` shards of its largest shard
  // must fit the budget twice. Safe while other threads gather; rows the
  // caller reads are the new layout's from the next gather on. Returns
  // false when `next` adds no shard.
  bool grow(Manifest next, uint32_t window);

  // Copy rows idx[0..n) to the columns of `out`, in order. An index outside
  // [0, rows) fails with OUT_OF_RANGE before anything is written.
  void gather_columns(const int64_t* idx, size_t n, const ColumnsOut& out) const;
  // The shards of `now` stay resident where the budget allows, and those of
  // `next` are loaded ahead (replacing the previous call's wishes).
  void want(const std::vector<RowSpanRef>& now, const std::vector<RowSpanRef>& next) const;
  ShardCacheStats stats() const;

 private:
  struct Resident {
    RowMemory mem;
    uint64_t last_use = 0;
    uint32_t pins = 0;
    bool ready = false;  // false while being loaded
  };
  ShardCache(std::string dir, std::shared_ptr<const Layout> layout, const ShardCacheOptions& o);
  void check_process() const;
  // Shard s's rows, pinned (unpin() after); loads it when not resident.
  const uint8_t* pin(uint32_t s) const;
  void unpin(uint32_t s) const;
  // Under mu_: evict unpinned ready shards (unwanted ones first when
  // `spare_wanted`, and then only those) until `bytes` more fit.
  bool make_room(uint64_t bytes, bool spare_wanted) const;
  void load(uint32_t s, std::unique_lock<std::mutex>& lk) const;  // mu_ held; dropped while reading
  void loader_loop();
  static void shards_of(const Layout& l, const std::vector<RowSpanRef>& spans,
                        std::vector<uint32_t>* out);

  std::string dir_;
  ShardCacheOptions o_;

  mutable std::mutex mu_;
  std::shared_ptr<const Layout> layout_;  // under mu_
  std::atomic<uint64_t> rows_{0};         // layout_'s rows
  // Heap-held: in a forked child it is leaked, since destroying a condition
  // variable the parent's loader thread waited on at the fork blocks forever.
  std::unique_ptr<std::condition_variable> cv_ = std::make_unique<std::condition_variable>();
  mutable std::vector<std::unique_ptr<Resident>> res_;
  mutable std::vector<char> wanted_;
  mutable std::vector<uint32_t> wished_now_, wished_next_;  // want()'s last shards
  mutable std::deque<uint32_t> queue_;
  mutable uint64_t resident_bytes_ = 0, clock_ = 0;
  mutable ShardCacheStats st_;
  bool stop_ = false;
  std::unique_ptr<std::thread> loader_;  // heap-held: see cv_
  long owner_pid_ = 0;
};

}  // namespace a2pack::dataset
