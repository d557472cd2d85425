#include "bag/zstd_codec.hpp"

#include <algorithm>
#include <cstdint>
#include <new>
#include <vector>

#include "base/error.hpp"

namespace a2pack::bag {
namespace {

// Upper bound of zstd's expansion: the smallest block (3-byte header + 1 RLE
// byte) yields at most 128 KiB. A frame claiming more than this per input
// byte is corrupt; checking it keeps a hostile header from sizing an
// allocation.
constexpr uint64_t kMaxExpansion = (128u << 10) / 4 + 1;

struct DCtx {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  ~DCtx() { ZSTD_freeDCtx(ctx); }
};

ZSTD_DCtx* thread_dctx() {
  thread_local DCtx d;
  if (!d.ctx) throw std::bad_alloc();
  return d.ctx;
}

}  // namespace

ZstdCompressor::ZstdCompressor() : ctx_(ZSTD_createCCtx()) {
  if (!ctx_) throw std::bad_alloc();
}
ZstdCompressor::~ZstdCompressor() { ZSTD_freeCCtx(ctx_); }

ZstdCodec::ZstdCodec(const ZstdSettings& s) : level_(s.level), dictionary_(s.dictionary) {
  if (s.level < ZSTD_minCLevel() || s.level > ZSTD_maxCLevel())
    fail(A2PACK_E_INVALID_ARGUMENT, "zstd level {} outside [{}, {}]", s.level, ZSTD_minCLevel(),
         ZSTD_maxCLevel());
  if (!s.dictionary.empty()) {
    ddict_ = ZSTD_createDDict(s.dictionary.data(), s.dictionary.size());
    if (!ddict_) {
      fail(A2PACK_E_INVALID_ARGUMENT, "zstd refused the {}-byte dictionary", s.dictionary.size());
    }
  }
}

ZstdCodec::~ZstdCodec() {
  ZSTD_freeDDict(ddict_);
}

size_t ZstdCodec::compress(ZstdCompressor& c, const uint8_t* src, size_t n, uint8_t* dst,
                           size_t cap) const {
  if (!c.configured_) {
    // Sticky parameters: the dictionary is digested once per context.
    size_t r = ZSTD_CCtx_setParameter(c.get(), ZSTD_c_compressionLevel, level_);
    if (!ZSTD_isError(r) && !dictionary_.empty())
      r = ZSTD_CCtx_loadDictionary(c.get(), dictionary_.data(), dictionary_.size());
    if (ZSTD_isError(r)) fail(A2PACK_E_INVALID_ARGUMENT, "zstd setup failed: {}", ZSTD_getErrorName(r));
    c.configured_ = true;
  }
  size_t r = ZSTD_compress2(c.get(), dst, cap, src, n);
  if (ZSTD_isError(r)) fail(A2PACK_E_INTERNAL, "zstd compression failed: {}", ZSTD_getErrorName(r));
  return r;
}

uint64_t ZstdCodec::content_size(const uint8_t* src, size_t n, const std::string& file,
                                 uint64_t record) {
  // Frame by frame (a record may hold several): sizes from the headers.
  uint64_t total = 0;
  size_t pos = 0;
  while (pos < n) {
    unsigned long long s = ZSTD_getFrameContentSize(src + pos, n - pos);
    if (s == ZSTD_CONTENTSIZE_ERROR)
      fail(A2PACK_E_CORRUPT, "{}: record {}: not a valid zstd frame at byte {} of {}", file, record,
           pos, n);
    size_t fsz = ZSTD_findFrameCompressedSize(src + pos, n - pos);
    if (ZSTD_isError(fsz))
      fail(A2PACK_E_CORRUPT, "{}: record {}: corrupt zstd frame at byte {} of {}: {}", file, record,
           pos, n, ZSTD_getErrorName(fsz));
    if (s == ZSTD_CONTENTSIZE_UNKNOWN) return kUnknown;
    total += s;
    if (total / kMaxExpansion > n)
      fail(A2PACK_E_CORRUPT, "{}: record {}: zstd frame of {} bytes claims {} decompressed bytes",
           file, record, n, total);
    pos += fsz;
  }
  return total;
}

void ZstdCodec::decompress_exact(const uint8_t* src, size_t n, uint8_t* dst, size_t dn,
                                 const std::string& file, uint64_t record) const {
  ZSTD_DCtx* d = thread_dctx();
  size_t r = ddict_ ? ZSTD_decompress_usingDDict(d, dst, dn, src, n, ddict_)
                    : ZSTD_decompressDCtx(d, dst, dn, src, n);
  if (ZSTD_isError(r))
    fail(A2PACK_E_CORRUPT, "{}: record {}: corrupt zstd frame: {}", file, record, ZSTD_getErrorName(r));
  if (r != dn)
    fail(A2PACK_E_CORRUPT, "{}: record {}: zstd frame decompressed to {} bytes, its header says {}", file, record, r, dn);
}

GrowBuffer ZstdCodec::decompress_unknown(const uint8_t* src, size_t n, const std::string& file,
                                         uint64_t record, uint64_t max_bytes) const {
  GrowBuffer out;
  stream(src, n, file, record, max_bytes, [&](uint64_t at_most, size_t& got) -> uint8_t* {
    if (out.size() == out.capacity()) {
      // Double (from zstd's block size), but never past max_bytes + 1: the
      // byte after the limit is all it takes to know the record is too big.
      uint64_t want = std::max<uint64_t>(ZSTD_DStreamOutSize(), out.capacity());
      want = std::min<uint64_t>(want, at_most);
      try {
        if (want > SIZE_MAX - out.capacity()) throw std::bad_alloc();
        out.reserve(out.capacity() + static_cast<size_t>(want));
      } catch (const std::bad_alloc&) {
        fail(A2PACK_E_NO_MEMORY, "{}: record {}: out of memory growing its decoded bytes past {}",
             file, record, out.size());
      }
    }
    got = static_cast<size_t>(std::min<uint64_t>(out.capacity() - out.size(), at_most));
    uint8_t* at = out.tail();
    out.append(got);
    return at;
  }, [&](size_t unused) { out.trim(unused); });
  return out;
}

uint64_t ZstdCodec::decoded_length(const uint8_t* src, size_t n, const std::string& file,
                                   uint64_t record, uint64_t max_bytes) const {
  thread_local std::vector<uint8_t> scratch(ZSTD_DStreamOutSize());
  uint64_t total = 0;
  stream(src, n, file, record, max_bytes, [&](uint64_t at_most, size_t& got) {
    got = static_cast<size_t>(std::min<uint64_t>(scratch.size(), at_most));
    total += got;
    return scratch.data();
  }, [&](size_t unused) { total -= unused; });
  return total;
}

template <typename Grow, typename Shrink>
void ZstdCodec::stream(const uint8_t* src, size_t n, const std::string& file, uint64_t record,
                       uint64_t max_bytes, Grow grow_by, Shrink give_back) const {
  ZSTD_DCtx* d = thread_dctx();
  ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
  if (ddict_) ZSTD_DCtx_refDDict(d, ddict_);
  ZSTD_inBuffer in{src, n, 0};
  const uint64_t limit = static_cast<uint64_t>(n) * kMaxExpansion;
  // Output stops at max_bytes + 1 bytes: reaching it proves the record too
  // big without decoding (or holding) the rest of it.
  const uint64_t cap = max_bytes == UINT64_MAX ? max_bytes : max_bytes + 1;
  uint64_t produced = 0;
  size_t r = 1;
  while (in.pos < in.size || r != 0) {
    if (produced > limit) {
      ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
      fail(A2PACK_E_CORRUPT, "{}: record {}: zstd frame of {} bytes expands past {} bytes", file, record, n, limit);
    }
    if (produced >= cap) break;  // past the limit: refused below
    size_t grow = 0;
    uint8_t* at = grow_by(cap - produced, grow);
    ZSTD_outBuffer o{at, grow, 0};
    size_t in_before = in.pos;
    r = ZSTD_decompressStream(d, &o, &in);
    give_back(grow - o.pos);
    produced += o.pos;
    if (ZSTD_isError(r)) {
      ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
      fail(A2PACK_E_CORRUPT, "{}: record {}: corrupt zstd frame: {}", file, record, ZSTD_getErrorName(r));
    }
    if (in.pos == in.size && r != 0 && o.pos == 0 && in.pos == in_before) {
      ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
      fail(A2PACK_E_CORRUPT, "{}: record {}: truncated zstd frame", file, record);
    }
  }
  ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
  if (produced > max_bytes)
    fail(A2PACK_E_UNSUPPORTED,
         "{}: record {}: decodes to more than the reader's limit of {} bytes "
         "(max_record_bytes; raise it to read this record)",
         file, record, max_bytes);
}

}  // namespace a2pack::bag
