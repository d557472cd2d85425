#include "pack/lz4_entry.hpp"

#include <lz4frame.h>

#include <memory>

#include "base/error.hpp"
#include "pack/format.hpp"

namespace a2pack::pack {
namespace {

struct CCtxFree {
  void operator()(LZ4F_cctx* c) const { LZ4F_freeCompressionContext(c); }
};
struct DCtxFree {
  void operator()(LZ4F_dctx* c) const { LZ4F_freeDecompressionContext(c); }
};

LZ4F_cctx* thread_cctx() {
  thread_local std::unique_ptr<LZ4F_cctx, CCtxFree> ctx([] {
    LZ4F_cctx* c = nullptr;
    return LZ4F_isError(LZ4F_createCompressionContext(&c, LZ4F_VERSION)) ? nullptr : c;
  }());
  if (!ctx) fail(A2PACK_E_NO_MEMORY, "lz4: cannot create a compression context");
  return ctx.get();
}

LZ4F_dctx* thread_dctx() {
  thread_local std::unique_ptr<LZ4F_dctx, DCtxFree> ctx([] {
    LZ4F_dctx* d = nullptr;
    return LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)) ? nullptr : d;
  }());
  if (!ctx) fail(A2PACK_E_NO_MEMORY, "lz4: cannot create a decompression context");
  return ctx.get();
}

void check_compress(size_t r, const char* step) {
  if (LZ4F_isError(r)) fail(A2PACK_E_INTERNAL, "lz4 compression failed ({}): {}", step, LZ4F_getErrorName(r));
}

}  // namespace

std::string lz4_compress(const uint8_t* data, size_t len, int level) {
  LZ4F_preferences_t prefs = LZ4F_INIT_PREFERENCES;
  // Self-describing and checked: the frame header records the run's length
  // and the frame ends with the XXH32 of the decompressed bytes.
  prefs.frameInfo.contentSize = len;
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  prefs.compressionLevel = level;
  // Begin / update / end on a reused context (stable API since liblz4 1.8,
  // so Debian's liblz4 builds it too): no allocation per entry.
  const size_t cap = LZ4F_HEADER_SIZE_MAX + LZ4F_compressBound(len, &prefs) + LZ4F_compressBound(0, &prefs);
  std::string out(cap, '\0');
  auto* dst = reinterpret_cast<uint8_t*>(out.data());
  LZ4F_cctx* c = thread_cctx();
  LZ4F_compressOptions_t co{};
  co.stableSrc = 1;
  size_t pos = LZ4F_compressBegin(c, dst, cap, &prefs);
  check_compress(pos, "frame header");
  size_t n = LZ4F_compressUpdate(c, dst + pos, cap - pos, data, len, &co);
  check_compress(n, "blocks");
  pos += n;
  n = LZ4F_compressEnd(c, dst + pos, cap - pos, &co);
  check_compress(n, "frame end");
  out.resize(pos + n);
  return out;
}

namespace {
// The checks that need no output: the claimed size and the frame header,
// parsed into `d` (reset first). Returns the header's length.
size_t begin_frame(LZ4F_dctx* d, const uint8_t* data, size_t len, uint32_t expected) {
  if (expected > kMaxDecompressed)
    fail(A2PACK_E_CORRUPT, "lz4 entry claims {} decompressed bytes, more than the {} allowed",
         expected, kMaxDecompressed);
  LZ4F_resetDecompressionContext(d);  // a frame that failed earlier on this thread leaves state
  LZ4F_frameInfo_t info;
  size_t consumed = len;
  size_t r = LZ4F_getFrameInfo(d, &info, data, &consumed);
  if (LZ4F_isError(r))
    fail(A2PACK_E_CORRUPT, "lz4 entry does not start with a valid LZ4 frame header ({} stored bytes): {}",
         len, LZ4F_getErrorName(r));
  if (info.contentSize != 0 && info.contentSize != expected)
    fail(A2PACK_E_CORRUPT, "LZ4 frame declares {} bytes but the index says {}", info.contentSize,
         expected);
  return consumed;
}

// The frame's blocks after its header into out[0, expected).
void finish_frame(LZ4F_dctx* d, const uint8_t* data, size_t len, size_t consumed, uint32_t expected,
                  uint8_t* out) {
  const uint8_t* src = data + consumed;
  size_t left = len - consumed;
  size_t produced = 0;
  for (;;) {
    size_t dst_size = expected - produced;
    size_t src_size = left;
    size_t r = LZ4F_decompress(d, out + produced, &dst_size, src, &src_size, nullptr);
    if (LZ4F_isError(r)) {
      LZ4F_resetDecompressionContext(d);
      fail(A2PACK_E_CORRUPT, "LZ4 frame is damaged (decoding from stored byte {}): {}", len - left,
           LZ4F_getErrorName(r));
    }
    produced += dst_size;
    src += src_size;
    left -= src_size;
    if (r == 0) break;  // the frame's end, its content checksum verified
    if (dst_size == 0 && src_size == 0) {
      LZ4F_resetDecompressionContext(d);
      if (left == 0)
        fail(A2PACK_E_CORRUPT,
             "LZ4 frame ends early: its {} stored bytes end before the frame does ({} of {} bytes "
             "decompressed)",
             len, produced, expected);
      fail(A2PACK_E_CORRUPT, "LZ4 frame decompresses to more than the {} bytes the index says",
           expected);
    }
  }
  if (produced != expected)
    fail(A2PACK_E_CORRUPT, "lz4 entry decompressed to {} bytes, the index says {}", produced, expected);
  if (left != 0)
    fail(A2PACK_E_CORRUPT, "{} stored bytes follow the LZ4 frame's end at byte {}", left, len - left);
}
}  // namespace

void lz4_decompress(const uint8_t* data, size_t len, uint32_t expected, std::vector<uint8_t>& out) {
  LZ4F_dctx* d = thread_dctx();
  size_t consumed = begin_frame(d, data, len, expected);  // before the output is allocated
  out.resize(expected);
  finish_frame(d, data, len, consumed, expected, out.data());
}

void lz4_decompress_into(const uint8_t* data, size_t len, uint32_t expected, uint8_t* out) {
  LZ4F_dctx* d = thread_dctx();
  finish_frame(d, data, len, begin_frame(d, data, len, expected), expected, out);
}

}  // namespace a2pack::pack
