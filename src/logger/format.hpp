// The data logger's on-disk format (docs/logger.md has the byte tables).
//
// A segment file `<dir>/segments/NNNNN.seg.zst` is a sequence of blocks:
//
//   [40-byte block header][one zstd frame of `compressed_len` bytes]
//
// The header is itself a zstd *skippable frame* (magic 0x184D2A5A, content
// size 32), so a segment stays a valid zstd stream that `zstd -d` / `zstdcat`
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
// The decompressed payload holds the seed's §3.2 varints with one change that
// makes every frame self-contained: the per-stream epoch delta base is 0 at
// the start of each frame, so the first record of a stream in a frame stores
// its absolute tick. Skipping a bad frame therefore never corrupts the epochs
// of later frames.
//
// Version 1 (read only): the records one after another, exactly §3.2.
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
inline constexpr uint32_t kSkippableSize = 32;           // bytes of header after the first 8
inline constexpr uint8_t kBlockMagic[4] = {'A', '2', 'L', 'G'};
inline constexpr uint8_t kFormatVersion = 2;    // what the writer writes
inline constexpr uint8_t kOldestVersion = 1;     // the oldest a reader reads
inline constexpr size_t kHeaderSize = 40;
// The fixed first 12 bytes of every header: what resynchronisation looks for.
inline constexpr uint8_t kHeaderPrefix[12] = {0x5A, 0x2A, 0x4D, 0x18, 0x20, 0x00,
                                              0x00, 0x00, 'A',  '2',  'L',  'G'};

// Limits a reader enforces before allocating by a header field. A frame never
// holds more than one maximal record plus a frame's worth of small ones.
inline constexpr uint32_t kMaxRecordValues = 1u << 26;  // 64 Mi non-zeros per record
inline constexpr uint64_t kMaxRawFrame = 1ull << 31;    // 2 GiB decompressed
inline constexpr uint32_t kMaxStreams = 1u << 22;       // stream ids 0 .. 4 Mi - 1

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
};

inline void write_header(uint8_t* out, const BlockHeader& h) {
  le::store<uint32_t>(out + 0, kSkippableMagic);
  le::store<uint32_t>(out + 4, kSkippableSize);
  std::memcpy(out + 8, kBlockMagic, 4);
  out[12] = h.version;
  out[13] = h.flags;
  le::store<uint16_t>(out + 14, 0);
  le::store<uint32_t>(out + 16, h.compressed_len);
  le::store<uint32_t>(out + 20, h.raw_len);
  le::store<uint32_t>(out + 24, h.n_records);
  le::store<uint32_t>(out + 28, h.n_values);
  le::store<uint32_t>(out + 32, h.payload_crc);
  le::store<uint32_t>(out + 36, crc32c::compute(out, 36));
}

enum class HeaderCheck { ok, bad_prefix, bad_crc, bad_version, bad_fields };

// Parse the 40 bytes at p (the caller checked they exist). Every count is
// checked against raw_len (a record takes at least 3 bytes, a non-zero 2), so
// a reader may size buffers by the header once it verified.
inline HeaderCheck read_header(const uint8_t* p, BlockHeader& h) {
  if (std::memcmp(p, kHeaderPrefix, sizeof kHeaderPrefix) != 0) return HeaderCheck::bad_prefix;
  if (crc32c::compute(p, 36) != le::load<uint32_t>(p + 36)) return HeaderCheck::bad_crc;
  h.version = p[12];
  h.flags = p[13];
  if (h.version < kOldestVersion || h.version > kFormatVersion) return HeaderCheck::bad_version;
  h.compressed_len = le::load<uint32_t>(p + 16);
  h.raw_len = le::load<uint32_t>(p + 20);
  h.n_records = le::load<uint32_t>(p + 24);
  h.n_values = le::load<uint32_t>(p + 28);
  h.payload_crc = le::load<uint32_t>(p + 32);
  if (h.flags != 0 || le::load<uint16_t>(p + 14) != 0 || h.compressed_len == 0 ||
      h.raw_len > kMaxRawFrame || h.n_records == 0 || h.n_records > h.raw_len / 3 ||
      h.n_values > h.raw_len / 2)
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
