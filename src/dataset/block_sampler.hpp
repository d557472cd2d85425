// The block-shuffle sampler of a sharded dataset (docs/dataset.md, "Reading
// a dataset larger than RAM"): each epoch a seeded permutation of the shards,
// dealt out to the ranks; each rank reads its shards a window of
// `window` shards at a time, every window's rows in a seeded random order.
// A batch is therefore drawn from the window's shards only, and a reader
// needs two windows resident (the one being read and the next, loading).
//
// Everything is a pure function of (seed, epoch, rank, world, the shards'
// row counts, window, batch size): every rank computes the same deal from
// the shared seed without talking to the others, and any batch of any epoch
// can be produced again (a checkpoint is O(1) bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace a2pack::dataset {

struct BlockPlan {
  uint64_t epoch = 0;
  std::vector<uint32_t> shards;      // this rank's shards, in reading order
  std::vector<uint64_t> window_pos;  // stream position of each window's first row; one more at the end
  uint64_t rows = 0;                 // the rank's rows this epoch (window_pos.back())
  uint64_t batches = 0;              // batches this epoch (the same on every rank)
  uint64_t stream_end = 0;           // rows of the stream read: batches' rows
  size_t windows() const { return window_pos.size() - 1; }
};

class BlockSampler {
 public:
  // shard_rows[i]: rows of shard i (global rows from first_rows[i]).
  // window >= 1 shards; rank < world; batch >= 1. With world > 1 every rank
  // takes the same number of full batches (the smallest rank's count) so
  // that data-parallel steps stay in step; with one rank the last batch of
  // an epoch may be short unless drop_last.
  BlockSampler(std::vector<uint64_t> shard_rows, std::vector<uint64_t> first_rows, uint64_t seed,
               size_t batch, uint32_t rank, uint32_t world, uint32_t window, bool drop_last);

  // The epoch's plan over the first `shards` shards (all by default: shards
  // appended during an epoch join at the next one when the stream was
  // restored mid-epoch from a state taken before them).
  BlockPlan plan(uint64_t epoch, size_t shards = SIZE_MAX) const;
  // The window's rows in their random order, as positions in the window's
  // pool (its shards' rows one after the other). O(rows of the window).
  std::vector<uint32_t> window_order(const BlockPlan& p, size_t w) const;
  // Global row of pool position `pos` of window w.
  uint64_t pool_row(const BlockPlan& p, size_t w, uint64_t pos) const;
  // The window holding stream position s.
  static size_t window_of(const BlockPlan& p, uint64_t s);

  size_t batch_size() const { return batch_; }
  uint32_t rank() const { return rank_; }
  uint32_t world() const { return world_; }
  uint32_t window() const { return window_; }
  uint64_t seed() const { return seed_; }
  size_t shard_count() const { return rows_.size(); }
  uint64_t shard_rows(size_t i) const { return rows_[i]; }
  uint64_t first_row(size_t i) const { return first_[i]; }
  // Hash of the first `shards` shards' row counts: a state's check that it
  // is restored over the same shards.
  uint64_t set_hash(size_t shards) const;

  // Checkpoint: magic "A2BS", version, seed, epoch, next batch, batch size,
  // rank, world, window, drop_last, shard count and hash, CRC32C. load_state
  // returns {epoch, next batch}; it refuses a damaged state or one of another
  // batch size, and - unless the state is at the start of an epoch, where a
  // new deal begins anyway - one of another rank count, window or shard set.
  std::string save_state(uint64_t epoch, uint64_t next_batch, size_t shards) const;
  struct Position {
    uint64_t epoch = 0, next_batch = 0;
    size_t shards = 0;  // the epoch's shards (see plan())
  };
  Position load_state(const void* data, size_t len) const;

 private:
  std::vector<uint64_t> rows_, first_;
  uint64_t seed_;
  size_t batch_;
  uint32_t rank_, world_, window_;
  bool drop_last_;
};

}  // namespace a2pack::dataset
