// Reading A2PACK packfiles: open-time checks, entry access, parallel batch
// decode, statistics and validation.
//
// Opening checks the header, footer and index CRCs and every entry's bounds
// in O(count) and touches no payload. Entry access checks the entry's CRC
// (when one is stored and verification is on), undoes zstd or lz4
// compression, and checks that the payload's format matches the index's
// `kind`. A bad entry fails alone; every other entry still reads.
//
// A Reader is immutable after construction except for its statistics cache,
// which a mutex guards: every method may be called from several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "pack/format.hpp"
#include "storage/object_store.hpp"
#include "pack/stats.hpp"
#include "run/batch.hpp"
#include "run/codec.hpp"

namespace a2pack::pack {

struct ReaderOptions {
  bool use_mmap = true;    // false: positional reads (pread) only
  bool verify_crc = true;  // default for entry access; calls may turn it off
};

// The run-file bytes of one entry, in owned storage: the stored bytes copied
// out (by pread, or from the mapping under a guard: base/mapped_guard.hpp),
// or the decompressed entry.
struct EntryBytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::vector<uint8_t> storage;
  EntryBytes() = default;
  EntryBytes(EntryBytes&& o) noexcept { *this = std::move(o); }
  EntryBytes& operator=(EntryBytes&& o) noexcept;
};

// Called between units of work of long operations with (done, total);
// returning false stops the operation with Error(INTERRUPTED).
using ProgressFn = std::function<bool(uint64_t, uint64_t)>;

// What an open file offers: a mapping or a descriptor for positional reads.
// A pack in object storage (s3://, gs://) is read by ranged requests: the
// header, footer and index once at open, each entry when it is read (use_mmap
// is a local-only hint there).
class PackSource {
 public:
  PackSource(const std::string& path, bool use_mmap);
  uint64_t size() const { return size_; }
  bool mapped() const { return mapped_; }
  const std::string& path() const { return path_; }
  // A view of [offset, offset+len) (mapped sources only; bounds checked by callers).
  const uint8_t* view(uint64_t offset) const { return map_.data() + offset; }
  // Copy [offset, offset+len) into buf (either kind of source).
  void read(void* buf, size_t len, uint64_t offset) const;
  // Whether the pack is in object storage (read by ranged requests).
  bool remote() const { return obj_ != nullptr; }
  // Many ranges at once: one storage::ReadObject::read_many for a remote
  // pack (neighbours merged, requests in parallel), else one read each.
  void read_many(storage::ReadRange* ranges, size_t n) const;

 private:
  std::string path_;
  bool mapped_;
  MappedFile map_;
  std::unique_ptr<ReadFd> fd_;
  std::unique_ptr<storage::ReadObject> obj_;  // s3:// / gs:// (never mapped)
  uint64_t size_ = 0;
};

class Reader {
 public:
  explicit Reader(const std::string& path, ReaderOptions opts = {});

  const std::string& path() const { return src_.path(); }
  uint64_t size() const { return entries_.size(); }
  uint64_t file_size() const { return src_.size(); }
  bool mapped() const { return src_.mapped(); }
  bool remote() const { return src_.remote(); }
  const ReaderOptions& options() const { return opts_; }
  const Header& header() const { return header_; }
  const Footer& footer() const { return footer_; }
  uint64_t index_end() const { return kHeaderSize + kEntrySize * entries_.size(); }
  uint64_t footer_start() const { return src_.size() - kFooterSize; }
  const std::optional<StatsBlock>& stats_block() const { return stats_block_; }
  // Why the stats block cannot be right ("" when it is, or there is none):
  // stats_block_problem at open; a block whose lengths the entries cannot
  // hold (stats_capacity_problem) is compared with the runs' headers first,
  // once. stats() and validate() refuse such a block.
  std::string stats_problem(uint32_t workers = 0) const;

  // Entry metadata; Error(OUT_OF_RANGE) for i >= size().
  const Entry& entry(uint64_t i) const;
  // Run format by the index; Error(UNSUPPORTED) for a kind other than 1 or 2.
  run::Kind kind(uint64_t i) const;

  // Zero-copy view of the stored bytes (the frame for compressed entries), the
  // entry CRC checked when `verify`. Mapped readers only (UNSUPPORTED else).
  const uint8_t* stored_view(uint64_t i, bool verify) const;
  // The run-file bytes (decompressed), checked as described at the top.
  EntryBytes payload(uint64_t i, bool verify) const;
  // The payload of entry i and the CRC32C of those run-file bytes (taken
  // from the index when the entry is stored verbatim with a CRC).
  EntryBytes payload_and_crc(uint64_t i, bool verify, uint32_t& crc) const;
  // The stored bytes of entries idx[0..n) (bounds checked first). A remote
  // pack fetches them as one batch of ranged requests (neighbours merged,
  // bounded parallelism) instead of a request per entry; local packs pread.
  std::vector<std::vector<uint8_t>> read_stored(const uint64_t* idx, size_t n) const;
  // payload_and_crc of entry i from its stored bytes read by read_stored
  // (taken over: a stored entry's payload is that same buffer).
  EntryBytes payload_from(uint64_t i, std::vector<uint8_t>&& stored, bool verify, uint32_t& crc) const;

  run::Run decode(uint64_t i, bool verify) const;
  // Decode entry i from its stored bytes, fetched beforehand (read_stored).
  run::Run decode_from(uint64_t i, std::vector<uint8_t>&& stored, bool verify) const;
  // Decode entries idx[0..n) in parallel on up to `workers` threads.
  std::vector<run::Run> decode_many(const uint64_t* idx, size_t n, uint32_t workers,
                                    bool verify) const;
  run::Batch decode_batch(const uint64_t* idx, size_t n, uint32_t workers, bool verify) const;

  // The stats block when the pack has one, else computed once (in parallel)
  // and cached. `from_block` says which.
  struct Stats {
    StatsBlock stats;
    bool from_block = false;
  };
  Stats stats(uint32_t workers) const;
  // Highest-tile and engine histograms, computed once from the runs' metadata
  // and cached. Pointers into the result stay valid while the reader lives.
  const Histograms& histograms(uint32_t workers) const;

  // Quick: the open-time checks plus a CRC check and full decode of up to 16
  // entries spread over the pack. Full: every entry's CRC and full decode,
  // the stats block against the runs, the zero padding everywhere, entry
  // overlaps, and the data CRC when one is stored. Throws Error naming every
  // failing entry (up to 10) with the status of the first.
  void validate(bool full, uint32_t workers, const ProgressFn& progress) const;

 private:
  void open();
  // Entries a and b share payload bytes: Error(CORRUPT) naming both ranges.
  [[noreturn]] void fail_overlap(size_t a, size_t b) const;
  // The overlap check of open() for an index not sorted by offset.
  void check_overlaps_unsorted() const;
  [[noreturn]] void fail_entry(uint64_t i, const Error& e) const;
  // Decode entry i's payload; a decode error names the pack and entry.
  run::Run decode_payload(uint64_t i, const EntryBytes& b) const;
  // First non-zero byte in [offset, offset+len), or nullopt.
  std::optional<uint64_t> first_nonzero(uint64_t offset, uint64_t len) const;
  void compute_summary(uint32_t workers) const;  // fills the caches; mu_ held
  // Zero padding that validate(full) checks: a remote pack's gaps of up to
  // kBatchedGap bytes are read in batches; `found` is told the first
  // non-zero byte of each gap that has one.
  struct Gap {
    uint64_t offset, len;
    const char* where;
  };
  static constexpr uint64_t kBatchedGap = 1u << 20;
  void check_gaps(const std::vector<Gap>& gaps,
                  const std::function<void(uint64_t, const char*)>& found) const;
  // Checks, decompression and kind check of entry i's stored bytes `stored`
  // (`buf` owns them).
  EntryBytes finish_payload(uint64_t i, const uint8_t* stored, std::vector<uint8_t>&& buf,
                            bool verify, uint32_t& crc) const;
  // decode_batch of a local pack that is not all stored entries in a
  // mapping: every entry's run-file bytes decompressed (or read) into one
  // buffer, nothing zero-filled (base/uninit_vector.hpp), then decoded.
  // False when the entries claim too much to lay out at once.
  bool decode_batch_local(const uint64_t* idx, size_t n, uint32_t workers, bool verify,
                          run::Batch& out) const;

  PackSource src_;
  ReaderOptions opts_;
  Header header_;
  Footer footer_;
  std::vector<Entry> entries_;
  std::optional<StatsBlock> stats_block_;
  uint64_t stats_block_end_ = 0;
  std::string stats_problem_;           // found at open
  mutable std::string capacity_problem_;  // to be settled by the runs; mu_

  mutable std::mutex mu_;
  mutable std::optional<StatsBlock> computed_stats_;
  mutable std::unique_ptr<Histograms> histograms_;
};

// Open-time limit on the zero padding after the index that is checked (the
// whole padding is checked by validate(full)).
inline constexpr uint64_t kOpenPadCheck = 1 << 20;

}  // namespace a2pack::pack
