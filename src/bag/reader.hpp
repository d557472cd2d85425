// A Bagz reader over one or many shards (docs/bag.md).
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

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bag/buffer_pool.hpp"
#include "bag/format.hpp"
#include "bag/shard.hpp"
#include "bag/zstd_codec.hpp"

namespace a2pack::bag {

// Where record k of a batch is: its shard, index in the shard and byte range
// [off, off+len) in that shard's records section.
struct RecordLoc {
  uint32_t shard;
  uint64_t local;
  uint64_t off, len;
};

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

class Reader;

// The first half of a batch read (Reader::prepare): every record located,
// its stored bytes at hand (a view of the mapping, or read once into scratch)
// and its decoded size known. fill() then copies or decompresses each record
// into a destination the caller chose, in parallel - so a binding can decode
// straight into its own objects (Python bytes) with no second copy, and the
// first touch of fresh memory happens on all the workers, not on one thread.
// The reader must outlive it. fill() may be called from one thread at a time.
class PendingRead {
 public:
  size_t size() const { return sizes_.size(); }
  // Decoded size of each record, in the order of the indices.
  const std::vector<uint64_t>& sizes() const { return sizes_; }
  uint64_t bytes() const { return bytes_; }
  // Record k into dests[k], which holds at least sizes()[k] bytes (not
  // touched when that is 0). CORRUPT naming shard and record for a bad frame.
  void fill(uint8_t* const* dests) const;

 private:
  friend class Reader;
  const Reader* reader_ = nullptr;
  uint32_t cpu_workers_ = 1;
  bool decodes_ = false;  // some record is a zstd frame
  std::vector<RecordLoc> locs_;
  std::vector<const uint8_t*> src_;
  PooledBuffer scratch_;  // stored bytes of records not read through a mapping
  std::vector<uint64_t> sizes_;
  uint64_t bytes_ = 0;
  std::vector<GrowBuffer> unsized_;  // frames without a content size, decoded
  std::vector<std::unique_ptr<uint8_t[]>> decoded_;  // frames decoded while the batch was read
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
  // Warnings found at open, one line each ("" when none); see Shard::note().
  std::string notes() const;

  // Decoded size of each record, without decoding: stored records as they
  // are, zstd frames from their headers (frames without a content size are
  // decompressed into a small scratch, counting, up to max_record_bytes).
  // Reads only the stored bytes; allocates nothing per record.
  void sizes(const uint64_t* indices, size_t n, uint64_t* out, uint32_t workers = 0) const;

  // Shard and index in it of global index g (< size()).
  void locate(uint64_t g, size_t& shard, uint64_t& local) const;

  // Read records by global index, in the order given (repeats allowed), on up
  // to `workers` threads (0 = options().max_parallelism, whose 0 = all cores).
  // OUT_OF_RANGE for an index >= size(); CORRUPT naming shard and record for
  // bad limits or a bad zstd frame.
  Batch read(const uint64_t* indices, size_t n, uint32_t workers = 0) const;
  // The same read in two steps (see PendingRead): locate, fetch and size
  // every record now; decode into the caller's memory with fill().
  PendingRead prepare(const uint64_t* indices, size_t n, uint32_t workers = 0) const;
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
  friend class PendingRead;
  struct Span {
    size_t k0, k1;
    uint32_t shard;
    uint64_t off, len;
  };
  struct Located {
    std::vector<RecordLoc> locs;
    std::vector<Span> spans;  // neighbours in a file merged into one read
    uint64_t stored_bytes = 0;
    bool any_compressed = false;
    bool all_mapped = true;
  };
  // Resolve every index (bounds and limits checked).
  Located locate_all(const uint64_t* indices, size_t n) const;
  void locate_into(Located& at, const uint64_t* indices, size_t n) const;
  void spans_unguarded(const uint64_t* indices, size_t n, uint32_t* shard, uint64_t* begin,
                       uint64_t* end) const;
  PendingRead prepare_located(Located at, uint32_t workers) const;
  // Sets p's size of record k (its stored bytes in place): from the zstd
  // frame header, decoding frames without one; with a budget, also decodes
  // the frame into p.decoded_[k] while the budget lasts.
  void size_record(PendingRead& p, size_t k, std::atomic<uint64_t>* budget) const;

  ReaderOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<uint64_t> starts_;  // CONCATENATED: first global index of each shard, plus total
  uint64_t total_ = 0;
  uint64_t records_bytes_ = 0;
  std::unique_ptr<ZstdCodec> codec_;  // present when some shard is compressed
};

}  // namespace a2pack::bag
