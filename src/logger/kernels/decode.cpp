// The record parsers of a frame (format versions 1 and 2), compiled once
// per instruction set; decoder.cpp picks the build this CPU runs at
// start-up (logger/cpu_features.hpp).
// It reads A2PACK_LOGGER_ISA; decode_build.hpp turns it into the macros the
// code below reads (A2PACK_LOGGER_NS, _FEATURES, _PEXT, _AVX2, _AVX512).
#include "logger/kernels/decode_build.hpp"

#if defined(A2PACK_LOGGER_NS)
// The region this build's code is compiled for (target_region.hpp says why
// a region rather than -m flags for the whole unit). The kernels' own
// headers come inside it: each build gets its own copy of them.
#if defined(A2PACK_LOGGER_FEATURES)
A2PACK_TARGET_BEGIN(A2PACK_LOGGER_FEATURES)
#endif
#if A2PACK_LOGGER_ISA == 2 && !defined(__clang__)
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (their
// _mm512_undefined_* placeholders); nothing of ours is silenced by this.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "logger/kernels/decode_values.hpp"

namespace a2pack::logger::A2PACK_LOGGER_NS {

FrameCount decode_frame(const uint8_t* raw, size_t len, uint32_t n_records,
                        const ScaleTable& scales, const FrameSink& out) {
  const uint8_t* const end = raw + len;
  Reader rd(raw, end);
  FrameCount c;
  // Frame-local delta bases (docs/logger.md): the tick of the last record of
  // each stream in this frame, 0 before its first. Stamps make the reset O(1).
  struct Base {
    uint64_t tick;
    uint32_t stamp;
    uint32_t div_stamp;  // the frame `sc` was worked out in
    Scaling sc;
  };
  thread_local std::vector<Base> tl_bases;
  thread_local uint32_t tl_stamp = 0;
  if (++tl_stamp == 0) {
    tl_bases.assign(tl_bases.size(), Base{0, 0, 0, {}});
    tl_stamp = 1;
  }
  if (tl_bases.size() < scales.size()) tl_bases.resize(scales.size(), Base{0, 0, 0, {}});
  Base* const bases = tl_bases.data();  // a plain local: see decode_frame_v2
  const uint32_t stamp = tl_stamp;
  size_t nv = 0, kept = 0;
  for (uint32_t r = 0; r < n_records; ++r) {
    uint64_t sid = rd.next(r);
    uint64_t zz = rd.next(r);
    uint64_t n = rd.next(r);
    if (sid > UINT32_MAX || n > kMaxRecordValues) bad_record(r, "field out of range");
    if (n > static_cast<uint64_t>(end - rd.pos()) / 2)
      bad_record(r, "count larger than the bytes left");
    if (n > out.cap_values - nv) bad_record(r, "more values than the frame holds");
    const StreamInfo* s = sid < scales.size() ? scales[sid] : nullptr;
    uint64_t tick = 0;
    Scaling sc;
    if (s) {  // records of unknown streams are parsed but not kept
      Base& b = bases[sid];
      uint64_t base = b.stamp == stamp ? b.tick : 0;
      tick = base + static_cast<uint64_t>(varint::zigzag_decode(zz));  // wraps like the encoder
      b.tick = tick;
      b.stamp = stamp;
      if (b.div_stamp != stamp) {  // once per stream and frame: never stale
        b.div_stamp = stamp;
        b.sc = Scaling::of(*s);
      }
      sc = b.sc;
    }
    if (n) {
      uint32_t* oi = out.indices + nv;
      double* ov = out.values + nv;
      uint64_t cur = rd.next(r);
      uint64_t overflow = cur;
      oi[0] = static_cast<uint32_t>(cur);
      for (uint64_t i = 1; i < n; ++i) {
        uint64_t g = rd.next(r);
        cur += g + 1;
        overflow |= g | cur;
        oi[i] = static_cast<uint32_t>(cur);
      }
      // While every gap and sum so far is below 2^32 the u64 sum cannot
      // wrap; the first that is not leaves high bits in `overflow`.
      if (overflow > UINT32_MAX) bad_record(r, "indices run past 2^32 - 1");
      for (uint64_t i = 0; i < n; ++i) ov[i] = sc.value(to_double(varint::zigzag_decode(rd.next(r))));
    }
    c.parsed_values += n;
    if (!s) {
      if (!c.skipped_unknown) c.first_unknown = static_cast<uint32_t>(sid);
      ++c.skipped_unknown;
      continue;
    }
    out.stream_ids[kept] = static_cast<uint32_t>(sid);
    out.epochs[kept] = sc.epoch(tick);
    nv += n;
    out.offsets[kept] = out.value_base + nv;
    ++kept;
  }
  if (rd.pos() != end)
    fail(A2PACK_E_CORRUPT, "{} bytes left after the {} records the header announces",
         end - rd.pos(), n_records);
  c.records = kept;
  c.values = nv;
  return c;
}

// ---- format version 2 (docs/logger.md)
//
// Two plain cursors, one per region; no window state. Varints come one at a
// time through get1 (checked), or many at a time through get_varints, which
// on the AVX2 build decodes four one- or two-byte varints per table lookup.

// One varint from [p, end), checked; throws naming record `rec`.
[[gnu::always_inline]] inline uint64_t get1(const uint8_t*& p, const uint8_t* end, uint32_t rec) {
  // One and two bytes inline (ids, counts, epoch steps, first indices);
  // longer ones through the checked loop.
  if (end - p >= 2) [[likely]] {
    uint64_t b0 = p[0];
    if (b0 < 0x80) {
      p += 1;
      return b0;
    }
    uint64_t b1 = p[1];
    if (b1 < 0x80) {
      p += 2;
      return (b0 & 0x7F) | b1 << 7;
    }
  }
  uint64_t v;
  auto r = varint::read<64>(p, end, v);
  if (r != varint::Result::ok) [[unlikely]]
    bad_record(rec, r == varint::Result::truncated ? "varint runs past the end of its region"
                                                   : "overlong varint");
  return v;
}

#ifdef A2PACK_LOGGER_AVX2
// Four varints of one or two bytes from the continuation bits of the next 8
// bytes (bit j: byte j continues): the shuffle that puts varint i's bytes in
// the low bytes of 32-bit lane i, and the bytes they take (0: a varint of
// three or more bytes, or one running past the 8 bytes; decode it checked).
struct Dec4 {
  uint8_t shuf[16];
  uint8_t len;
};
inline constexpr auto kDec4 = [] {
  std::array<Dec4, 256> t{};
  for (unsigned c = 0; c < 256; ++c) {
    Dec4 e{};
    for (auto& x : e.shuf) x = 0x80;  // zero
    unsigned pos = 0;
    bool ok = true;
    for (unsigned i = 0; i < 4 && ok; ++i) {
      if (pos < 8 && !(c >> pos & 1)) {
        e.shuf[4 * i] = static_cast<uint8_t>(pos);
        pos += 1;
      } else if (pos + 1 < 8 && (c >> pos & 1) && !(c >> (pos + 1) & 1)) {
        e.shuf[4 * i] = static_cast<uint8_t>(pos);
        e.shuf[4 * i + 1] = static_cast<uint8_t>(pos + 1);
        pos += 2;
      } else {
        ok = false;
      }
    }
    e.len = ok ? static_cast<uint8_t>(pos) : 0;
    t[c] = e;
  }
  return t;
}();

// Two varints of one to three bytes from the continuation bits of the next
// 6 bytes: the shuffle that puts varint i's bytes in the low bytes of 32-bit
// lane i, and the bytes they take (0: a longer varint, or one running past
// the 6 bytes). The fallback when kDec4 cannot take the next four (values
// that need 14 to 21 bits: unpredictable values at a fine scale), two at a
// time through a 64-entry table instead of one at a time through the
// checked byte loop.
inline constexpr auto kDec2x3 = [] {
  std::array<Dec4, 64> t{};
  for (unsigned c = 0; c < 64; ++c) {
    Dec4 e{};
    for (auto& x : e.shuf) x = 0x80;
    unsigned pos = 0;
    bool ok = true;
    for (unsigned i = 0; i < 2 && ok; ++i) {
      unsigned len = 0;
      while (len < 3 && pos + len < 6 && (c >> (pos + len) & 1)) ++len;
      // len continuation bytes, then the terminator at pos + len.
      if (len == 3 || pos + len >= 6) {
        ok = false;
        break;
      }
      for (unsigned k = 0; k <= len; ++k) e.shuf[4 * i + k] = static_cast<uint8_t>(pos + k);
      pos += len + 1;
    }
    e.len = ok ? static_cast<uint8_t>(pos) : 0;
    t[c] = e;
  }
  return t;
}();

// The values of up to four varints of at most two (three) bytes, each in
// the low bytes of a 32-bit lane: 7 bits from each byte.
[[gnu::always_inline]] inline __m128i varint_lanes2(__m128i x) {
  return _mm_or_si128(_mm_and_si128(x, _mm_set1_epi32(0x7F)),
                      _mm_and_si128(_mm_srli_epi32(x, 1), _mm_set1_epi32(0x3F80)));
}
[[gnu::always_inline]] inline __m128i varint_lanes3(__m128i x) {
  return _mm_or_si128(varint_lanes2(x),
                      _mm_and_si128(_mm_srli_epi32(x, 2), _mm_set1_epi32(0x1FC000)));
}
#endif

// m varints from [p, end) into out[0, m); out has room for m rounded up to
// a multiple of 4. Throws naming record `rec` on a malformed or truncated
// varint; never reads outside [p, end).
inline const uint8_t* get_varints(const uint8_t* p, const uint8_t* end, size_t m, uint64_t* out,
                                  uint32_t rec) {
  size_t i = 0;
#ifdef A2PACK_LOGGER_AVX2
  while (i + 4 <= m && end - p >= 16) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const unsigned cont = static_cast<unsigned>(_mm_movemask_epi8(b));
    const Dec4& e = kDec4[cont & 0xFF];
    if (e.len == 0) [[unlikely]] {
      const Dec4& e2 = kDec2x3[cont & 0x3F];
      if (e2.len == 0) {  // four bytes or more: the checked loop
        out[i++] = get1(p, end, rec);
        continue;
      }
      __m128i x = varint_lanes3(
          _mm_shuffle_epi8(b, _mm_loadu_si128(reinterpret_cast<const __m128i*>(e2.shuf))));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_cvtepu32_epi64(x));
      p += e2.len;
      i += 2;
      continue;
    }
    __m128i x = _mm_shuffle_epi8(b, _mm_loadu_si128(reinterpret_cast<const __m128i*>(e.shuf)));
    x = varint_lanes2(x);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_cvtepu32_epi64(x));
    p += e.len;
    i += 4;
  }
#endif
  for (; i < m; ++i) out[i] = get1(p, end, rec);
  return p;
}

// The n indices of a record (first index, then gaps) from [p, end) into oi.
// Returns the new cursor; *last receives the last index as u64 (above
// 2^32 - 1 when they overflow). On the AVX2 build four gaps at a time: a
// table decode, +1, an in-register prefix sum, one store. Gaps from the fast
// path are below 2^14, so a lane can only wrap when the running u64 total
// (checked by the caller) passes 2^32 - 1 too.
inline const uint8_t* get_indices(const uint8_t* p, const uint8_t* end, size_t n, uint32_t* oi,
                                  uint32_t rec, uint64_t* last) {
  uint64_t cur = get1(p, end, rec);
  uint64_t overflow = cur;
  oi[0] = static_cast<uint32_t>(cur);
  size_t i = 1;
#ifdef A2PACK_LOGGER_AVX2
  const __m128i one = _mm_set1_epi32(1);
  while (i + 4 <= n && end - p >= 16) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const Dec4& e = kDec4[static_cast<unsigned>(_mm_movemask_epi8(b)) & 0xFF];
    if (e.len == 0) [[unlikely]] {
      uint64_t g = get1(p, end, rec);
      cur += g + 1;
      overflow |= g | cur;
      oi[i++] = static_cast<uint32_t>(cur);
      continue;
    }
    __m128i x = _mm_shuffle_epi8(b, _mm_loadu_si128(reinterpret_cast<const __m128i*>(e.shuf)));
    x = _mm_add_epi32(varint_lanes2(x), one);
    x = _mm_add_epi32(x, _mm_slli_si128(x, 4));
    x = _mm_add_epi32(x, _mm_slli_si128(x, 8));  // inclusive prefix sums
    _mm_storeu_si128(reinterpret_cast<__m128i*>(oi + i),
                     _mm_add_epi32(x, _mm_set1_epi32(static_cast<int>(static_cast<uint32_t>(cur)))));
    cur += static_cast<uint32_t>(_mm_extract_epi32(x, 3));
    overflow |= cur;
    p += e.len;
    i += 4;
  }
#endif
  for (; i < n; ++i) {
    uint64_t g = get1(p, end, rec);
    cur += g + 1;
    overflow |= g | cur;
    oi[i] = static_cast<uint32_t>(cur);
  }
  // While every gap and every sum so far is below 2^32 the u64 sum cannot
  // wrap; the first that is not leaves high bits in `overflow`.
  *last = overflow;
  return p;
}

// Format version 2: the structure region and the value region read by two
// cursors in step, each value decoded against the previous record of the
// same stream in the frame. Every count is checked against the bytes left in
// its region and the sink's capacity before use.
FrameCount decode_frame_v2(const uint8_t* raw, size_t len, uint32_t n_records,
                           const ScaleTable& scales, const FrameSink& out) {
  if (len < kV2Prefix)
    fail(A2PACK_E_CORRUPT, "a {}-byte frame is too short for its structure length", len);
  const uint32_t slen = le::load<uint32_t>(raw);
  if (slen > len - kV2Prefix)
    fail(A2PACK_E_CORRUPT, "the structure length {} runs past the frame ({} bytes)", slen, len);
  const uint8_t* ps = raw + kV2Prefix;
  const uint8_t* const s_end = ps + slen;
  const uint8_t* pv = s_end;
  const uint8_t* const end = raw + len;
  FrameCount c;
  constexpr uint32_t kNone = UINT32_MAX;
  // Per stream within this frame: the epoch delta base, the divisors, and
  // where the previous record's indices (in out.indices) and quantised values
  // (in qs) are, frame-locally. Stamps make the reset O(1).
  struct Base {
    uint64_t tick;
    uint32_t stamp;
    uint32_t div_stamp;  // the frame `sc` was worked out in
    Scaling sc;
    size_t pred_off;
    uint32_t pred_n;
  };
  thread_local std::vector<Base> tl_bases;
  thread_local uint32_t tl_stamp = 0;
  thread_local Column<int64_t> tl_qs;  // quantised values of the kept records, frame-local
  if (++tl_stamp == 0) {
    tl_bases.assign(tl_bases.size(), Base{0, 0, 0, {}, 0, kNone});
    tl_stamp = 1;
  }
  if (tl_bases.size() < scales.size()) tl_bases.resize(scales.size(), Base{0, 0, 0, {}, 0, kNone});
  if (tl_qs.size() < out.cap_values) tl_qs.resize(out.cap_values);
  // Plain locals from here on: in the shared library every use of a
  // thread_local can cost a __tls_get_addr call (one per record here).
  Base* const bases = tl_bases.data();
  const uint32_t stamp = tl_stamp;
  int64_t* const qs = tl_qs.data();
  constexpr size_t kBlock = 64;
  alignas(32) uint64_t buf[kBlock];
  size_t nv = 0, kept = 0;
  for (uint32_t r = 0; r < n_records; ++r) {
    uint64_t sid = get1(ps, s_end, r);
    uint64_t zz = get1(ps, s_end, r);
    uint64_t n = get1(ps, s_end, r);
    if (sid > UINT32_MAX || n > kMaxRecordValues) bad_record(r, "field out of range");
    if (n > static_cast<uint64_t>(s_end - ps))
      bad_record(r, "count larger than the structure bytes left");
    if (n > static_cast<uint64_t>(end - pv)) bad_record(r, "count larger than the value bytes left");
    if (n > out.cap_values - nv) bad_record(r, "more values than the frame holds");
    const StreamInfo* s = sid < scales.size() ? scales[sid] : nullptr;
    uint64_t tick = 0;
    Scaling sc;
    const uint32_t* pi = nullptr;
    const int64_t* pq = nullptr;
    size_t pn = 0;
    if (s) {  // records of unknown streams are parsed but not kept
      Base& b = bases[sid];
      const bool seen = b.stamp == stamp;
      tick = (seen ? b.tick : 0) + static_cast<uint64_t>(varint::zigzag_decode(zz));  // wraps
      if (seen && b.pred_n != kNone) {
        pi = out.indices + b.pred_off;
        pq = qs + b.pred_off;
        pn = b.pred_n;
      }
      b.tick = tick;
      b.stamp = stamp;
      b.pred_off = nv;
      b.pred_n = n <= kMaxPredictorValues ? static_cast<uint32_t>(n) : kNone;
      if (b.div_stamp != stamp) {  // once per stream and frame: never stale
        b.div_stamp = stamp;
        b.sc = Scaling::of(*s);
      }
      sc = b.sc;
    }
    uint32_t* oi = out.indices + nv;
    if (n) {
      uint64_t top;
      ps = get_indices(ps, s_end, static_cast<size_t>(n), oi, r, &top);
      if (top > UINT32_MAX) bad_record(r, "indices run past 2^32 - 1");
    }
    if (!s) {
      for (size_t b = 0; b < n; b += kBlock)
        pv = get_varints(pv, end, n - b < kBlock ? static_cast<size_t>(n - b) : kBlock, buf, r);
    } else if (n) {
      // q = prediction + delta, wrapping like the encoder's difference.
      int64_t* q = qs + nv;
      double* ov = out.values + nv;
      for (size_t b = 0; b < n; b += kBlock) {
        size_t m = n - b < kBlock ? static_cast<size_t>(n - b) : kBlock;
        pv = get_varints(pv, end, m, buf, r);
        size_t k = 0;
#ifdef A2PACK_LOGGER_AVX2
        // Four at a time while whole groups remain, in registers.
        for (; k + 4 <= m; k += 4) {
          __m256i d = zigzag4(_mm256_load_si256(reinterpret_cast<const __m256i*>(buf + k)));
          if (pn) d = _mm256_add_epi64(d, predict4(b + k, n, oi, pi, pq, pn));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b + k), d);
          if (sc.value_div != 0) {
            store_values4<true>(d, ov + b + k, sc);
          } else {
            store_values4<false>(d, ov + b + k, sc);
          }
        }
#endif
        if (k < m) {
          int64_t pred[kBlock];
          if (pn) predict_scalar(oi, b + k, m - k, pi, pq, pn, pred);
          for (size_t i = k; i < m; ++i) {
            uint64_t p = pn ? static_cast<uint64_t>(pred[i - k]) : 0;
            int64_t x = static_cast<int64_t>(p + static_cast<uint64_t>(varint::zigzag_decode(buf[i])));
            q[b + i] = x;
            ov[b + i] = sc.value(to_double(x));
          }
        }
      }
    }
    c.parsed_values += n;
    if (!s) {
      if (!c.skipped_unknown) c.first_unknown = static_cast<uint32_t>(sid);
      ++c.skipped_unknown;
      continue;
    }
    out.stream_ids[kept] = static_cast<uint32_t>(sid);
    out.epochs[kept] = sc.epoch(tick);
    nv += n;
    out.offsets[kept] = out.value_base + nv;
    ++kept;
  }
  if (ps != s_end)
    fail(A2PACK_E_CORRUPT, "{} structure bytes left after the {} records the header announces",
         s_end - ps, n_records);
  if (pv != end)
    fail(A2PACK_E_CORRUPT, "{} value bytes left after the {} records the header announces",
         end - pv, n_records);
  c.records = kept;
  c.values = nv;
  return c;
}

}  // namespace a2pack::logger::A2PACK_LOGGER_NS

#if A2PACK_LOGGER_ISA == 2 && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#if defined(A2PACK_LOGGER_FEATURES)
A2PACK_TARGET_END
#endif
#endif  // A2PACK_LOGGER_NS
