// Reading a sharded dataset larger than RAM (docs/dataset.md, "Reading a
// dataset larger than RAM"): whole shards are loaded into memory within a
// byte budget, least recently used out, while a block-shuffle sampler
// (block_sampler.hpp) draws every batch from the shards of its window. A
// background thread loads the next window's shards while the current one
// is read, so a batch rarely waits for the disk.
//
// One thread at a time may call a stream's methods (the loader thread is
// its own business). A process forked from the one that opened a stream
// cannot use it (its loader thread is not there): next() and the other
// calls that move it fail naming this, and destroying it there frees
// nothing the parent owns.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dataset/block_sampler.hpp"
#include "dataset/columns.hpp"
#include "dataset/manifest.hpp"
#include "dataset/memory.hpp"

namespace a2pack::dataset {

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

  const Manifest& manifest() const { return m_; }
  const BlockSampler& sampler() const { return sampler_; }
  const BlockPlan& plan() const { return plan_; }
  uint64_t epoch() const { return plan_.epoch; }
  uint64_t next_batch() const { return next_batch_; }
  uint64_t max_shard_bytes() const { return max_shard_bytes_; }

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
  struct Resident {
    RowMemory mem;
    uint64_t last_use = 0;
    bool ready = false;  // false while being loaded
  };
  struct WindowRef {
    uint64_t epoch;
    size_t shards;  // the plan's shard count
    size_t w;
    bool operator==(const WindowRef& o) const {
      return epoch == o.epoch && shards == o.shards && w == o.w;
    }
  };
  struct Order {
    WindowRef ref;
    uint64_t plan_rows;
    std::shared_ptr<const std::vector<uint32_t>> perm;
  };

  ShardStream(const std::string& dir, Manifest m, const ShardStreamOptions& o, BlockSampler s);
  void start_epoch(uint64_t e, size_t shards, uint64_t next_batch);
  void repin_locked();
  // Row pointers (when loading) and global indices of stream positions [a, b).
  size_t fill_rows(uint64_t a, uint64_t b, const uint8_t** ptrs, int64_t* idx, bool load);
  const uint8_t* shard_data(uint32_t s);  // loads when not resident; consumer only
  std::shared_ptr<const std::vector<uint32_t>> order(const BlockPlan& p, size_t w);
  void remember_order_locked(Order o);
  // Under mu_: make room for `bytes` by evicting unpinned, ready shards.
  bool make_room(uint64_t bytes);
  void load(uint32_t s, std::unique_lock<std::mutex>& lk);  // under mu_, drops it while reading
  void loader_loop();

  std::string dir_;
  Manifest m_;
  ShardStreamOptions o_;
  BlockSampler sampler_;
  uint64_t max_shard_bytes_ = 0;

  BlockPlan plan_;
  size_t plan_shards_ = 0;  // the shards plan_ covers
  uint64_t next_batch_ = 0;
  size_t cur_window_ = SIZE_MAX;
  BlockPlan next_plan_;  // the next epoch's, for the last window's successor

  mutable std::mutex mu_;
  // Heap-held: in a forked child it is leaked, since destroying a condition
  // variable the parent's loader thread waited on at the fork blocks forever
  // (glibc waits for its waiters).
  std::unique_ptr<std::condition_variable> cv_ = std::make_unique<std::condition_variable>();
  std::vector<std::unique_ptr<Resident>> res_;
  std::vector<char> pinned_;
  uint64_t resident_bytes_ = 0, clock_ = 0;
  std::deque<uint32_t> queue_;
  std::vector<Order> orders_;  // the windows' orders computed last (a few)
  BlockPlan wanted_plan_;      // the successor window, whose order the loader computes
  size_t wanted_w_ = 0;
  bool want_order_ = false;
  std::vector<const uint8_t*> ptrs_;
  bool stop_ = false;
  ShardStreamStats st_;
  // Heap-held so that a forked child, where the thread does not exist, can
  // let go of it without joining (a joinable std::thread cannot be destroyed).
  std::unique_ptr<std::thread> loader_;
  long owner_pid_ = 0;
  void check_process() const;
};

}  // namespace a2pack::dataset
