// The data logger's on-disk format (docs/logger.md has the byte tables).
//
// A segment file `<dir>/segments/NNNNN.seg.zst` is a sequence of blocks:
//
//   [56-byte block header][one zstd frame of `compressed_len` bytes]
//
// or a header alone (a marker: the closing frame that ends a segment the
// logger finished, the resume marker that begins the first segment of a
// reopened folder whose newest segment a killed logger left unclosed). The
// header numbers the data frames of each segment and carries the segment's
// own number and records so far, so lost, repeated, reordered and foreign
// frames and a segment cut between frames are detected (sequence.hpp).
// Versions 1 and 2 (still read) have a 40-byte header without these.
//
// The header is itself a zstd *skippable frame* (magic 0x184D2A5A, content
// size 48; 32 in versions 1 and 2), so a segment stays a valid zstd stream that `zstd -d` / `zstdcat`
// read (they skip our headers). Inside the skippable frame: our magic
// "A2LG", version, the lengths, the record and non-zero counts (so a reader
// sizes its output columns from the headers alone and decodes every frame
// straight into place), a CRC32C of the compressed bytes and a CRC32C of the
// header itself. The reader verifies the header CRC
// before trusting any length and the payload CRC before decompressing, so a
// torn tail (a crash mid-write) or a flipped byte is detected without
// touching zstd; after a bad block the reader scans forward for the next
// 12-byte header prefix whose header CRC verifies and goes on from there.
//
// The decompressed payload holds the varint records of the single-folder
// layout (docs/formats.md) with one change that
// makes every frame self-contained: the per-stream epoch delta base is 0 at
// the start of each frame, so the first record of a stream in a frame stores
// its absolute tick. Skipping a bad frame therefore never corrupts the epochs
// of later frames.
//
// Version 1 (read only): the records one after another, in that layout.
// Version 2 (written): the same varints in two regions — first every record's
// structure (stream id, epoch delta, n, first index, gaps), then every
// record's values — and each value coded against a predictor: the quantised
// value at the same index in the previous record of the same stream in the
// frame (0 when there is none). Structure repeats across records and
// compresses in long matches once values no longer interrupt it; slowly
// changing values become small deltas. Both halve the compressed size of
// typical simulation logs and make zstd faster (docs/logger.md).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"

namespace a2pack::logger {

// A vector whose resize() leaves new elements uninitialised: output columns
// (and the writer's frame buffers) are sized to an upper bound and filled
// once, and untouched pages of a large bound are never faulted in. Large
// blocks (the decoder's output columns) are 2 MiB-aligned and marked for
// transparent huge pages: first-touch page faults are the largest cost of
// decoding into fresh memory, and one fault per 2 MiB instead of per 4 KiB
// roughly halves it (the kernel still zero-fills the pages).
template <typename T>
struct DefaultInit : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInit<U>;
  };
  using std::allocator<T>::allocator;
  static constexpr size_t kHuge = size_t{2} << 20;
  T* allocate(size_t n) {
    size_t bytes = n * sizeof(T);
    if (bytes < 4 * kHuge) return std::allocator<T>::allocate(n);
    size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < 4 * kHuge) return std::allocator<T>::deallocate(p, n);
    std::free(p);
  }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <typename T>
using Column = std::vector<T, DefaultInit<T>>;

inline constexpr uint32_t kSkippableMagic = 0x184D2A5A;  // zstd skippable frame, nibble A
inline constexpr uint8_t kBlockMagic[4] = {'A', '2', 'L', 'G'};
// Header versions. 3 (written): the 56-byte header that also numbers the
// frames of a segment and has marker blocks (a closing frame, a resume
// marker); its payload is version 2's. 1 and 2 (still read): the 40-byte
// header, payload version 1 or 2, no sequence.
inline constexpr uint8_t kFormatVersion = 3;   // what the writer writes
inline constexpr uint8_t kPayloadVersion = 2;  // the newest payload layout
inline constexpr uint8_t kOldestVersion = 1;   // the oldest a reader reads
inline constexpr size_t kHeaderSize = 56;      // version 3's header: what the writer writes
inline constexpr size_t kHeaderSizeV2 = 40;    // versions 1 and 2
inline constexpr size_t kMinHeaderSize = kHeaderSizeV2;
// The fixed first 12 bytes of every header (the skippable frame's content
// size differs): what resynchronisation looks for.
inline constexpr uint8_t kHeaderPrefix[12] = {0x5A, 0x2A, 0x4D, 0x18, 0x30, 0x00,
                                              0x00, 0x00, 'A',  '2',  'L',  'G'};
inline constexpr uint8_t kHeaderPrefixV2[12] = {0x5A, 0x2A, 0x4D, 0x18, 0x20, 0x00,
                                                0x00, 0x00, 'A',  '2',  'L',  'G'};
// Version 3 flags. A marker block is a header with no zstd frame after it.
inline constexpr uint8_t kFlagClose = 1;   // closing frame: the segment was closed cleanly
inline constexpr uint8_t kFlagResume = 2;  // resume marker: a reopened folder's first block

// Limits a reader enforces before allocating by a header field. A frame never
// holds more than one maximal record plus a frame's worth of small ones.
inline constexpr uint32_t kMaxRecordValues = 1u << 26;  // 64 Mi non-zeros per record
inline constexpr uint64_t kMaxRawFrame = 1ull << 31;    // 2 GiB decompressed
inline constexpr uint32_t kMaxStreams = 1u << 22;       // stream ids 0 .. 4 Mi - 1

// The writer keeps every frame within this many decompressed bytes per byte
// on disk (header included), half the readers' default max_expansion, so
// that limit never refuses what the logger wrote: a frame that compresses
// further (the same record over and over) is followed, inside its
// compressed_len, by a zstd skippable frame of zeros (kPadMagic) that zstd
// skips when decompressing.
inline constexpr uint64_t kWriterMaxExpansion = 512;
inline constexpr uint32_t kPadMagic = 0x184D2A5B;  // skippable, nibble B: not a header
inline constexpr size_t kPadMin = 8;               // a skippable frame's own header

// Version 2: a record serves as the value predictor of its stream's next
// record in the frame only when it has at most this many non-zeros, which
// bounds the encoder's per-frame state without limiting record sizes.
inline constexpr uint32_t kMaxPredictorValues = 1u << 16;
// Version 2: bytes before the structure region (its length, u32).
inline constexpr size_t kV2Prefix = 4;

// Worst-case encoded size of one record with n non-zeros: stream id (5),
// epoch delta (10), n (5), n indices (5 each), n values (10 each), plus the
// spare bytes the encoder's 8-byte varint stores may touch past the end.
inline constexpr uint64_t kEncodeSlack = 8;
inline constexpr uint64_t max_record_bytes(uint64_t n) { return 20 + 15 * n + kEncodeSlack; }
// Version 2 splits the same bytes: structure (ids, counts, indices) and values.
inline constexpr uint64_t max_struct_bytes(uint64_t n) { return 20 + 5 * n + kEncodeSlack; }
inline constexpr uint64_t max_value_bytes(uint64_t n) { return 10 * n + kEncodeSlack; }

struct BlockHeader {
  uint8_t version = kFormatVersion;
  uint8_t flags = 0;
  uint32_t compressed_len = 0;
  uint32_t raw_len = 0;
  uint32_t n_records = 0;
  uint32_t n_values = 0;  // non-zeros of all the records
  uint32_t payload_crc = 0;
  // Version 3 only (docs/logger.md, "Frame sequence"):
  uint32_t segment = 0;  // the number of the segment the block was written into
  // Data frame: its number in the segment (from 0). Closing frame: the
  // segment's data frames. Resume marker: the segment it resumes after.
  uint32_t seq = 0;
  // Data frame: records of the segment before it. Closing frame: the
  // segment's records. Resume marker: that segment's size in bytes when the
  // folder was reopened.
  uint64_t count = 0;

  size_t size() const { return version >= 3 ? kHeaderSize : kHeaderSizeV2; }
  // The layout of the decompressed payload (version 3 carries version 2's).
  uint8_t payload_version() const { return version >= 3 ? kPayloadVersion : version; }
  bool sequenced() const { return version >= 3; }
  bool marker() const { return (flags & (kFlagClose | kFlagResume)) != 0; }
};

// Writes h.size() bytes: version 3's layout, or 1 and 2's (tests forge old frames).
inline void write_header(uint8_t* out, const BlockHeader& h) {
  const bool v3 = h.version >= 3;
  le::store<uint32_t>(out + 0, kSkippableMagic);
  le::store<uint32_t>(out + 4, static_cast<uint32_t>(h.size() - 8));
  std::memcpy(out + 8, kBlockMagic, 4);
  out[12] = h.version;
  out[13] = h.flags;
  le::store<uint16_t>(out + 14, 0);
  le::store<uint32_t>(out + 16, h.compressed_len);
  le::store<uint32_t>(out + 20, h.raw_len);
  le::store<uint32_t>(out + 24, h.n_records);
  le::store<uint32_t>(out + 28, h.n_values);
  le::store<uint32_t>(out + 32, h.payload_crc);
  if (v3) {
    le::store<uint32_t>(out + 36, h.segment);
    le::store<uint32_t>(out + 40, h.seq);
    le::store<uint64_t>(out + 44, h.count);
  }
  const size_t crc_at = h.size() - 4;
  le::store<uint32_t>(out + crc_at, crc32c::compute(out, crc_at));
}

enum class HeaderCheck { ok, bad_prefix, bad_crc, bad_version, bad_fields, short_header };

// Size of the header whose prefix is at p (avail bytes there): 56 or 40,
// 0 when p holds no header prefix.
inline size_t header_size_at(const uint8_t* p, size_t avail) {
  if (avail < sizeof kHeaderPrefix) return 0;
  if (std::memcmp(p, kHeaderPrefix, sizeof kHeaderPrefix) == 0) return kHeaderSize;
  if (std::memcmp(p, kHeaderPrefixV2, sizeof kHeaderPrefixV2) == 0) return kHeaderSizeV2;
  return 0;
}

// Parse the header at p (avail bytes there). Every count is checked against
// raw_len (a record takes at least 3 bytes, a non-zero 2), so a reader may
// size buffers by the header once it verified. short_header: a prefix with
// fewer bytes after it than its header needs (a torn write).
inline HeaderCheck read_header(const uint8_t* p, size_t avail, BlockHeader& h) {
  const size_t hs = header_size_at(p, avail);
  if (!hs) return HeaderCheck::bad_prefix;
  if (avail < hs) return HeaderCheck::short_header;
  if (crc32c::compute(p, hs - 4) != le::load<uint32_t>(p + hs - 4)) return HeaderCheck::bad_crc;
  h = BlockHeader{};
  h.version = p[12];
  h.flags = p[13];
  const bool v3 = hs == kHeaderSize;
  if (v3 ? h.version != kFormatVersion : (h.version < kOldestVersion || h.version > 2))
    return HeaderCheck::bad_version;
  h.compressed_len = le::load<uint32_t>(p + 16);
  h.raw_len = le::load<uint32_t>(p + 20);
  h.n_records = le::load<uint32_t>(p + 24);
  h.n_values = le::load<uint32_t>(p + 28);
  h.payload_crc = le::load<uint32_t>(p + 32);
  if (v3) {
    h.segment = le::load<uint32_t>(p + 36);
    h.seq = le::load<uint32_t>(p + 40);
    h.count = le::load<uint64_t>(p + 44);
  }
  if (le::load<uint16_t>(p + 14) != 0) return HeaderCheck::bad_fields;
  if (v3 && h.marker()) {
    // A marker is one kind, with no frame after it.
    if (h.flags != kFlagClose && h.flags != kFlagResume) return HeaderCheck::bad_fields;
    if (h.compressed_len || h.raw_len || h.n_records || h.n_values || h.payload_crc)
      return HeaderCheck::bad_fields;
    return HeaderCheck::ok;
  }
  if (h.flags != 0 || h.compressed_len == 0 || h.raw_len > kMaxRawFrame || h.n_records == 0 ||
      h.n_records > h.raw_len / 3 || h.n_values > h.raw_len / 2)
    return HeaderCheck::bad_fields;
  return HeaderCheck::ok;
}

// Quantisation: q = round(x / scale), rounding half to even (IEEE default,
// like numpy.round). The magic-number trick rounds any |r| < 2^52 without a
// libm call; larger magnitudes are already integers. Returns false when the
// result is not finite or does not fit in int64 (nothing is written then).
inline bool quantise(double x, double scale, int64_t& q) {
  double r = x / scale;
  // NaN fails both comparisons; ±inf and |r| >= 2^63 fail one.
  if (!(r >= -9223372036854775808.0 && r < 9223372036854775808.0)) return false;
  // Without -ffast-math the compiler may not fold (r + M) - M, so this rounds.
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  double t = (r + kMagic) - kMagic;
  q = static_cast<int64_t>(std::fabs(r) < 4503599627370496.0 ? t : r);
  return true;
}

}  // namespace a2pack::logger
