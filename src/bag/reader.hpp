// A Bagz reader over one or many shards (FORMATS.md §6, seed 002).
//
// Global index → (shard, index in shard): CONCATENATED walks the shards one
// after another (binary search over the prefix sums); INTERLEAVED
// round-robins, which bagz allows only for shard sizes that never increase and
// differ by at most one — the same rule, checked at open.
//
// Batch reads are the unit of work: one call resolves every index, merges
// records that sit next to each other in a file into one read, then copies or
// decompresses all of them in parallel into one contiguous buffer plus an
// offsets array. A reader is immutable after opening, so any number of
// threads may read from it at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bag/buffer_pool.hpp"
#include "bag/format.hpp"
#include "bag/shard.hpp"
#include "bag/zstd_codec.hpp"

namespace a2pack::bag {

// Records i of a batch are data[offsets[i], offsets[i+1]).
struct Batch {
  PooledBuffer data;
  uint64_t bytes = 0;
  std::vector<uint64_t> offsets{0};
  size_t size() const { return offsets.size() - 1; }
  std::string_view record(size_t i) const {
    return {reinterpret_cast<const char*>(data.get()) + offsets[i], offsets[i + 1] - offsets[i]};
  }
};

class Reader {
 public:
  Reader(const std::vector<std::string>& paths, const ReaderOptions& options);
  // Open a file spec (see shard_spec.hpp).
  static std::unique_ptr<Reader> open(const std::string& spec, const ReaderOptions& options);

  uint64_t size() const { return total_; }
  size_t shard_count() const { return shards_.size(); }
  const Shard& shard(size_t i) const { return *shards_[i]; }
  const ReaderOptions& options() const { return options_; }
  // Sum of the shards' records sections (compressed bytes for .bagz).
  uint64_t records_bytes() const { return records_bytes_; }

  // Shard and index in it of global index g (< size()).
  void locate(uint64_t g, size_t& shard, uint64_t& local) const;

  // Read records by global index, in the order given (repeats allowed), on up
  // to `workers` threads (0 = options().max_parallelism, whose 0 = all cores).
  // OUT_OF_RANGE for an index >= size(); CORRUPT naming shard and record for
  // bad limits or a bad zstd frame.
  Batch read(const uint64_t* indices, size_t n, uint32_t workers = 0) const;
  // Records [start, start+count).
  Batch read_range(uint64_t start, uint64_t count, uint32_t workers = 0) const;

  // Where records are stored, without reading them: shard[k] and the byte
  // range [begin[k], end[k]) of record indices[k] in that shard's records
  // section (validated like a read). With every shard mapped and stored
  // uncompressed (see zero_copy()), a binding copies each record once, straight
  // from the mapping, instead of through a batch.
  void spans(const uint64_t* indices, size_t n, uint32_t* shard, uint64_t* begin,
             uint64_t* end) const;
  void spans_range(uint64_t start, uint64_t count, uint32_t* shard, uint64_t* begin,
                   uint64_t* end) const;
  // True when every shard is read through mmap and stores records as they are.
  bool zero_copy() const;

 private:
  ReaderOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<uint64_t> starts_;  // CONCATENATED: first global index of each shard, plus total
  uint64_t total_ = 0;
  uint64_t records_bytes_ = 0;
  std::unique_ptr<ZstdCodec> codec_;  // present when some shard is compressed
};

}  // namespace a2pack::bag
