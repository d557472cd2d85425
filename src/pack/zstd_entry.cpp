#include "pack/zstd_entry.hpp"

#include <zstd.h>

#include <memory>

#include "base/error.hpp"
#include "pack/format.hpp"

namespace a2pack::pack {
namespace {

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

ZSTD_CCtx* thread_cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> ctx(ZSTD_createCCtx());
  if (!ctx) fail(A2PACK_E_NO_MEMORY, "zstd: cannot create a compression context");
  return ctx.get();
}

ZSTD_DCtx* thread_dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> ctx(ZSTD_createDCtx());
  if (!ctx) fail(A2PACK_E_NO_MEMORY, "zstd: cannot create a decompression context");
  return ctx.get();
}

}  // namespace

std::string zstd_compress(const uint8_t* data, size_t len, int level) {
  std::string out(ZSTD_compressBound(len), '\0');
  // compressCCtx writes the content size into the frame header.
  size_t n = ZSTD_compressCCtx(thread_cctx(), out.data(), out.size(), data, len, level);
  if (ZSTD_isError(n)) fail(A2PACK_E_INTERNAL, "zstd compression failed: {}", ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

namespace {
// The checks that need no output: the claimed size and the frame header.
void check_frame(const uint8_t* data, size_t len, uint32_t expected) {
  if (expected > kMaxDecompressed)
    fail(A2PACK_E_CORRUPT, "zstd entry claims {} decompressed bytes, more than the {} allowed",
         expected, kMaxDecompressed);
  unsigned long long declared = ZSTD_getFrameContentSize(data, len);
  if (declared == ZSTD_CONTENTSIZE_ERROR)
    fail(A2PACK_E_CORRUPT, "zstd entry does not start with a valid zstd frame header");
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != expected)
    fail(A2PACK_E_CORRUPT, "zstd frame declares {} bytes but the index says {}", declared,
         expected);
}

void decompress_checked(const uint8_t* data, size_t len, uint32_t expected, uint8_t* out) {
  size_t n = ZSTD_decompressDCtx(thread_dctx(), out, expected, data, len);
  if (ZSTD_isError(n)) fail(A2PACK_E_CORRUPT, "zstd decompression failed: {}", ZSTD_getErrorName(n));
  if (n != expected)
    fail(A2PACK_E_CORRUPT, "zstd entry decompressed to {} bytes, the index says {}", n, expected);
}
}  // namespace

void zstd_decompress(const uint8_t* data, size_t len, uint32_t expected, std::vector<uint8_t>& out) {
  check_frame(data, len, expected);  // before the output is allocated
  out.resize(expected);
  decompress_checked(data, len, expected, out.data());
}

void zstd_decompress_into(const uint8_t* data, size_t len, uint32_t expected, uint8_t* out) {
  check_frame(data, len, expected);
  decompress_checked(data, len, expected, out);
}

}  // namespace a2pack::pack
