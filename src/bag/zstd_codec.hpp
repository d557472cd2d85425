// Per-record zstd as bagz writes it: one frame per non-empty record, with the
// content size in the frame header and no checksum (zstd's defaults, which is
// what bagz's frames carry; with the bundled zstd 1.5.7 - bagz's release - the
// frames at level 1 are byte-identical to bagz 0.3.8's). A dictionary is
// loaded once per compression context (sticky parameters + ZSTD_compress2)
// rather than per record, and digested once (DDict) for all decompressing
// threads; those frames decode the same both ways but need not match bagz's
// bytes (bagz prepares the dictionary per record).
#pragma once

#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "bag/format.hpp"
#include "bag/grow_buffer.hpp"

namespace a2pack::bag {

// A compression context owned by one thread at a time.
class ZstdCompressor {
 public:
  ZstdCompressor();
  ~ZstdCompressor();
  ZstdCompressor(const ZstdCompressor&) = delete;
  ZstdCompressor& operator=(const ZstdCompressor&) = delete;
  ZstdCompressor(ZstdCompressor&& o) noexcept : ctx_(o.ctx_), configured_(o.configured_) {
    o.ctx_ = nullptr;
  }
  ZSTD_CCtx* get() const { return ctx_; }

 private:
  friend class ZstdCodec;
  ZSTD_CCtx* ctx_;
  bool configured_ = false;  // level and dictionary set (by the one codec using it)
};

class ZstdCodec {
 public:
  explicit ZstdCodec(const ZstdSettings& settings);
  ~ZstdCodec();
  ZstdCodec(const ZstdCodec&) = delete;
  ZstdCodec& operator=(const ZstdCodec&) = delete;

  // Compress src into dst (capacity ZSTD_compressBound(n)); returns the frame size.
  size_t compress(ZstdCompressor& c, const uint8_t* src, size_t n, uint8_t* dst, size_t cap) const;

  // Decompressed size of a record's frame(s) as stored in the frame headers,
  // or kUnknown when a frame does not carry it. Throws CORRUPT (naming
  // file and record) for bytes that are not zstd frames or claim an impossible size.
  static constexpr uint64_t kUnknown = ~uint64_t{0};
  static uint64_t content_size(const uint8_t* src, size_t n, const std::string& file, uint64_t record);

  // Decompress into exactly `dn` bytes; CORRUPT naming file and record otherwise.
  void decompress_exact(const uint8_t* src, size_t n, uint8_t* dst, size_t dn,
                        const std::string& file, uint64_t record) const;
  // Decompress frames without a stored size (streaming, into a buffer that
  // doubles but never holds more than limit + 1 bytes); UNSUPPORTED naming
  // file, record and limit as soon as the output passes `limit` bytes, so a
  // small frame that inflates to gigabytes costs about `limit` of memory.
  GrowBuffer decompress_unknown(const uint8_t* src, size_t n, const std::string& file,
                                uint64_t record, uint64_t limit) const;
  // The decoded length of frames without a stored size, counted through a
  // small scratch buffer (nothing kept); the same errors.
  uint64_t decoded_length(const uint8_t* src, size_t n, const std::string& file, uint64_t record,
                          uint64_t limit) const;

 private:
  // Stream-decompress, asking grow_by(at_most, got) for more output each
  // round (at most `at_most` bytes, so the output never passes max_bytes + 1;
  // it sets `got` >= 1) and handing back the unused tail with give_back(unused).
  template <typename Grow, typename Shrink>
  void stream(const uint8_t* src, size_t n, const std::string& file, uint64_t record,
              uint64_t max_bytes, Grow grow_by, Shrink give_back) const;
  int level_;
  std::string dictionary_;
  ZSTD_DDict* ddict_ = nullptr;
};

}  // namespace a2pack::bag
