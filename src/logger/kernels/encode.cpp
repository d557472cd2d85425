// The body of record encoding (format versions 1 and 2), compiled once per
// instruction set; encoder.cpp picks the build this CPU runs at start-up
// (logger/cpu_features.hpp).
// Which build this unit is, from A2PACK_LOGGER_ISA (set by CMakeLists.txt,
// which compiles this file once per instruction set):
//   0  any CPU (namespace generic)
//   1  x86-64 with BMI1/2, LZCNT and AVX2 (namespace fast): pdep spreads the
//      varint groups, the quantisation loop runs four wide
// and the macros the code below reads: A2PACK_LOGGER_PDEP, _AVX2.
#if !defined(A2PACK_LOGGER_ISA)
#error "compiled by CMakeLists.txt with A2PACK_LOGGER_ISA set"
#elif A2PACK_LOGGER_ISA == 0
#define A2PACK_LOGGER_NS generic
#elif A2PACK_LOGGER_ISA == 1 && defined(__x86_64__)
#define A2PACK_LOGGER_NS fast
#define A2PACK_LOGGER_FEATURES "bmi,bmi2,lzcnt,avx,avx2"
#define A2PACK_LOGGER_PDEP 1
#define A2PACK_LOGGER_AVX2 1
#endif

#if defined(A2PACK_LOGGER_NS)

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/varint.hpp"
#include "logger/encoder.hpp"
#include "logger/kernels/kernels.hpp"
#include "logger/kernels/target_region.hpp"

// GCC's -O2 vectorises only loops whose trip count needs no epilogue; these
// block loops need one, so allow the dynamic cost model for this code.
#if !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
// The region this build's code is compiled for (target_region.hpp says why
// a region rather than -m flags for the whole unit).
#if defined(A2PACK_LOGGER_FEATURES)
A2PACK_TARGET_BEGIN(A2PACK_LOGGER_FEATURES)
#endif
#include "logger/kernels/predict.hpp"

namespace a2pack::logger::A2PACK_LOGGER_NS {

// Bytes of a varint by count of leading zero bits of the 64-bit value
// (index 0..63; 64 is never used since v | 1 is non-zero), and the
// continuation bits of a varint of that many bytes, by the same index.
inline constexpr uint8_t kLenByLz[64] = {10, 9, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 7,
                                         7,  7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 5, 5, 5,
                                         5,  5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3,
                                         3,  3, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1};
inline constexpr uint64_t cont_bits(unsigned len) {
  return len >= 9 ? 0 : 0x8080808080808080ull & ((uint64_t{1} << (8 * (len - 1))) - 1);
}
inline constexpr auto kContByLz = [] {
  std::array<uint64_t, 64> t{};
  for (unsigned lz = 0; lz < 64; ++lz) t[lz] = cont_bits(kLenByLz[lz]);
  return t;
}();
inline constexpr bool varint_table_ok() {
  for (unsigned lz = 0; lz < 64; ++lz)
    if (kLenByLz[lz] != (64 - lz + 6) / 7) return false;
  return true;
}
static_assert(varint_table_ok());

// Branch-free store of a varint of a value below 2^56 (at most 8 bytes): the
// byte count comes from the leading-zero count, the 7-bit groups are spread
// into bytes (pdep, or three shift-and-mask steps), the continuation bits are
// or-ed in and 8 bytes are stored at once (callers reserve kEncodeSlack spare
// bytes). Varint lengths vary from value to value, so the usual byte loop
// mispredicts its exit about once per value; this is a handful of ALU ops.
inline uint8_t* put56(uint8_t* p, uint64_t v) {
  unsigned lz = static_cast<unsigned>(__builtin_clzll(v | 1));
#ifdef A2PACK_LOGGER_PDEP
  uint64_t x = _pdep_u64(v, 0x7F7F7F7F7F7F7F7Full);
#else
  uint64_t x = v;
  x = (x & 0x000000000FFFFFFFull) | ((x & 0x00FFFFFFF0000000ull) << 4);
  x = (x & 0x00003FFF00003FFFull) | ((x & 0x0FFFC0000FFFC000ull) << 2);
  x = (x & 0x007F007F007F007Full) | ((x & 0x3F803F803F803F80ull) << 1);
#endif
  x |= kContByLz[lz];
  std::memcpy(p, &x, 8);
  return p + kLenByLz[lz];
}

// Any value: 2^56 and more (rare) take the byte loop.
inline uint8_t* put(uint8_t* p, uint64_t v) {
  if (v >= (uint64_t{1} << 56)) [[unlikely]]
    return varint::write(p, v);
  return put56(p, v);
}


// The record: stream id, epoch delta, then indices and values. Returns nullptr (having written garbage) when the
// indices are not strictly increasing or a value does not quantise; the
// caller then finds and reports the exact problem (or sorts). Work goes in
// blocks: the arithmetic (gaps, order check, quantisation) in loops the
// compiler vectorises, then the varint stores.
uint8_t* encode_body(uint8_t* p, uint32_t sid, uint64_t zz_delta, double value_scale,
                     const uint32_t* idx, const double* val, size_t n) {
  p = put56(p, sid);
  p = put(p, zz_delta);
  p = put56(p, n);
  if (n == 0) return p;
  p = put(p, idx[0]);
  constexpr size_t kBlock = 64;
  uint32_t gaps[kBlock];
  for (size_t b = 1; b < n; b += kBlock) {
    size_t m = n - b < kBlock ? n - b : kBlock;
    uint32_t bad = 0;
    for (size_t k = 0; k < m; ++k) {
      uint32_t cur = idx[b + k], prev = idx[b + k - 1];
      bad |= static_cast<uint32_t>(cur <= prev);
      gaps[k] = cur - prev - 1;
    }
    if (bad) [[unlikely]]
      return nullptr;
    for (size_t k = 0; k < m; ++k) p = put56(p, gaps[k]);
  }
  // Quantisation: for |r| < 2^51, adding 1.5 * 2^52 rounds r to an integer
  // (half to even) and leaves it in the low mantissa bits, so one add and
  // one integer subtract give round(r) as int64. A block holding a larger
  // magnitude (or NaN/inf) takes the exact scalar path below.
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  const int64_t magic_bits = std::bit_cast<int64_t>(kMagic);
  uint64_t zz[kBlock];
  for (size_t b = 0; b < n; b += kBlock) {
    size_t m = n - b < kBlock ? n - b : kBlock;
    int64_t out_of_range = 0;
    for (size_t k = 0; k < m; ++k) {
      double r = val[b + k] / value_scale;
      out_of_range |= static_cast<int64_t>(!(std::fabs(r) < 2251799813685248.0));  // 2^51
      int64_t q = std::bit_cast<int64_t>(r + kMagic) - magic_bits;
      zz[k] = (static_cast<uint64_t>(q) << 1) ^ static_cast<uint64_t>(q >> 63);
    }
    if (out_of_range) [[unlikely]] {
      for (size_t k = 0; k < m; ++k) {
        int64_t q;
        if (!quantise(val[b + k], value_scale, q)) return nullptr;
        p = put(p, varint::zigzag_encode(q));
      }
      continue;
    }
    // |q| < 2^51 here, so every ZigZag value is below 2^52.
    for (size_t k = 0; k < m; ++k) p = put56(p, zz[k]);
  }
  return p;
}

#ifdef A2PACK_LOGGER_AVX2
// Format version 2 (docs/logger.md), the AVX2 build of encode_body_v2 (same
// contract as the portable one below). Everything runs in registers, eight
// positions at a time, with masked loads at the ends (nothing is read
// outside the caller's arrays or the previous record): indices to gaps and
// the order check; values quantised, predicted from the previous record's
// three neighbouring positions, ZigZag'ed; then each group of eight varints
// below 2^14 (one or two bytes) is packed to 16-bit lanes and written by one
// table shuffle and one 16-byte store. Intermediate arrays would be written
// in one width and read in another, which stalls store forwarding; registers
// avoid that. Groups with larger varints take put56 one by one.
inline constexpr auto kSqueeze14 = [] {
  std::array<std::array<uint8_t, 16>, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    unsigned o = 0;
    for (unsigned i = 0; i < 8; ++i) {
      t[m][o++] = static_cast<uint8_t>(2 * i);
      if (m >> i & 1) t[m][o++] = static_cast<uint8_t>(2 * i + 1);
    }
    for (; o < 16; ++o) t[m][o] = 0x80;  // zero
  }
  return t;
}();

// The varints of r (2..8) values below 2^14 in the 16-bit lanes of x. The
// store reaches 16 bytes past p: a group of r >= 2 values has at least
// 5r + kEncodeSlack >= 16 bytes reserved (a group of one takes put56).
inline uint8_t* squeeze14(uint8_t* p, __m128i x, size_t r) {
  const __m128i low7 = _mm_set1_epi16(0x7F);
  __m128i two = _mm_cmpgt_epi16(x, low7);  // lanes of two bytes
  __m128i bytes = _mm_or_si128(
      _mm_or_si128(_mm_and_si128(x, low7),
                   _mm_and_si128(_mm_slli_epi16(x, 1), _mm_set1_epi16(0x7F00))),
      _mm_and_si128(two, _mm_set1_epi16(0x80)));
  unsigned mask = _pext_u32(static_cast<unsigned>(_mm_movemask_epi8(two)), 0x5555u) &
                  ((1u << r) - 1);
  __m128i sq = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSqueeze14[mask].data()));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_shuffle_epi8(bytes, sq));
  return p + r + static_cast<unsigned>(__builtin_popcount(mask));
}

// Varints below 2^21 (one to three bytes), four per 32-bit lane group: the
// continuation bits of byte 0 (value >= 2^7) and byte 1 (>= 2^14) of each
// lane index a table of shuffles that drop the unused bytes.
inline constexpr auto kSqueeze21 = [] {
  std::array<std::array<uint8_t, 16>, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    unsigned o = 0;
    for (unsigned i = 0; i < 4; ++i) {
      t[m][o++] = static_cast<uint8_t>(4 * i);
      if (m >> i & 1) t[m][o++] = static_cast<uint8_t>(4 * i + 1);
      if (m >> (4 + i) & 1) t[m][o++] = static_cast<uint8_t>(4 * i + 2);
    }
    for (; o < 16; ++o) t[m][o] = 0x80;
  }
  return t;
}();

// The varints of the first r (1..4) lanes of x (u32, each below 2^21) at p.
// The store reaches 16 bytes past p: r values have at least 10r +
// kEncodeSlack >= 16 bytes reserved in the value region.
inline uint8_t* squeeze21(uint8_t* p, __m128i x, size_t r) {
  const __m128i c1 = _mm_cmpgt_epi32(x, _mm_set1_epi32(0x7F));
  const __m128i c2 = _mm_cmpgt_epi32(x, _mm_set1_epi32(0x3FFF));
  __m128i bytes = _mm_or_si128(
      _mm_or_si128(_mm_and_si128(x, _mm_set1_epi32(0x7F)),
                   _mm_and_si128(_mm_slli_epi32(x, 1), _mm_set1_epi32(0x7F00))),
      _mm_or_si128(_mm_and_si128(_mm_slli_epi32(x, 2), _mm_set1_epi32(0x7F0000)),
                   _mm_or_si128(_mm_and_si128(c1, _mm_set1_epi32(0x80)),
                                _mm_and_si128(c2, _mm_set1_epi32(0x8000)))));
  const unsigned live = (1u << r) - 1;
  unsigned m1 = static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(c1))) & live;
  unsigned m2 = static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(c2))) & live;
  __m128i sq = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSqueeze21[m1 | m2 << 4].data()));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_shuffle_epi8(bytes, sq));
  return p + r + static_cast<unsigned>(__builtin_popcount(m1) + __builtin_popcount(m2));
}

// Low 32 bits of two times four 64-bit lanes (values below 2^14) as eight
// 16-bit lanes.
inline __m128i pack16(__m256i a, __m256i b) {
  const __m256i lows = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
  return _mm_packus_epi32(_mm256_castsi256_si128(_mm256_permutevar8x32_epi32(a, lows)),
                          _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(b, lows)));
}

struct Quad {
  __m256i zz;   // ZigZag(q - prediction)
  __m256i q;
  __m256i bad;  // lanes that did not quantise by the fast rounding
};

// Positions [k, k + 4) of the values, lanes at or past n masked out.
// Quantisation divides exactly as the portable build, but a division costs
// eight times a multiplication's throughput, so the quotient is first taken
// as value × (1 / scale). That product is within 2^-51 (relative) of the
// true quotient (two roundings of 2^-53 each), so it rounds to the same
// integer unless it lies within that distance of a half-integer; only then
// (ties included: 2.5 / 1) is the division done. Same q, fewer cycles.
[[gnu::always_inline]] inline Quad value_quad(size_t k, size_t n, const uint32_t* idx,
                                              const double* val, __m256d vscale, __m256d vinv,
                                              const int64_t* pidx, const int64_t* pq,
                                              size_t pn) {
  const __m256i lanes = _mm256_setr_epi64x(0, 1, 2, 3);
  const __m256i kv = _mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(k)), lanes);
  const __m256i live = _mm256_cmpgt_epi64(_mm256_set1_epi64x(static_cast<int64_t>(n)), kv);
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  const __m256d magic = _mm256_set1_pd(kMagic), sign_bit = _mm256_set1_pd(-0.0);
  // Masked loads only for a partial group: plain loads stream faster.
  const __m256d x = k + 4 <= n ? _mm256_loadu_pd(val + k) : _mm256_maskload_pd(val + k, live);
  __m256d r = _mm256_mul_pd(x, vinv);
  {
    __m256d t = _mm256_sub_pd(_mm256_add_pd(r, magic), magic);  // nearest integer
    __m256d h = _mm256_andnot_pd(sign_bit, _mm256_sub_pd(r, t));   // in [0, 0.5]
    __m256d tol = _mm256_mul_pd(_mm256_andnot_pd(sign_bit, r), _mm256_set1_pd(0x1p-50));
    // Not NaN-safe on purpose: NaN compares false and is caught below.
    __m256d near = _mm256_cmp_pd(_mm256_sub_pd(_mm256_set1_pd(0.5), h), tol, _CMP_LE_OQ);
    if (_mm256_movemask_pd(near)) [[unlikely]]
      r = _mm256_div_pd(x, vscale);
  }
  __m256d mag = _mm256_andnot_pd(_mm256_set1_pd(-0.0), r);
  // Not below 2^51 (NaN included), in a live lane: the exact path decides.
  __m256i bad = _mm256_and_si256(
      live, _mm256_castpd_si256(_mm256_cmp_pd(mag, _mm256_set1_pd(2251799813685248.0),
                                              _CMP_NLT_UQ)));
  __m256i q = _mm256_sub_epi64(
      _mm256_castpd_si256(_mm256_add_pd(r, _mm256_set1_pd(kMagic))),
      _mm256_set1_epi64x(std::bit_cast<int64_t>(kMagic)));
  __m256i pred = pn ? predict4_padded(k, n, idx, pidx, pq, pn) : _mm256_setzero_si256();
  __m256i d = _mm256_sub_epi64(q, pred);  // wraps like the scalar difference
  __m256i sign = _mm256_cmpgt_epi64(_mm256_setzero_si256(), d);
  __m256i zz = _mm256_and_si256(_mm256_xor_si256(_mm256_slli_epi64(d, 1), sign), live);
  return {zz, q, bad};
}

BodyEnds encode_body_v2(uint8_t* s, uint8_t* v, uint32_t sid, uint64_t zz_delta,
                        double value_scale, const uint32_t* idx, const double* val, size_t n,
                        const int64_t* pidx, const int64_t* pq, size_t pn, int64_t* qout,
                        int64_t* iout) {
  s = put56(s, sid);
  s = put(s, zz_delta);
  s = put56(s, n);
  if (n == 0) return {s, v};
  s = put(s, idx[0]);
  if (iout) iout[0] = idx[0];
  const __m256i iota8 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i small = _mm256_set1_epi32(~0x3FFF);
  for (size_t k = 1; k < n; k += 8) {  // gaps of positions [k, k + 8)
    size_t r = n - k < 8 ? n - k : 8;
    __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(r)), iota8);
    __m256i cur, prev;
    if (r == 8) {  // masked loads only for a partial group: plain ones stream faster
      cur = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + k));
      prev = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + k - 1));
    } else {
      cur = _mm256_maskload_epi32(reinterpret_cast<const int*>(idx + k), live);
      prev = _mm256_maskload_epi32(reinterpret_cast<const int*>(idx + k - 1), live);
    }
    // cur <= prev (unsigned) exactly when max(cur, prev) == prev.
    __m256i bad = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_max_epu32(cur, prev), prev), live);
    if (!_mm256_testz_si256(bad, bad)) [[unlikely]]
      return {nullptr, nullptr};
    // The record's indices for the next record's predictor (kept only once
    // the whole record is accepted).
    if (iout) {  // as int64 (the arena's layout, see FrameState)
      const __m256i lo = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(cur));
      const __m256i hi = _mm256_cvtepu32_epi64(_mm256_extracti128_si256(cur, 1));
      if (r == 8) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(iout + k), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(iout + k + 4), hi);
      } else {
        const __m256i rv = _mm256_set1_epi64x(static_cast<int64_t>(r));
        _mm256_maskstore_epi64(reinterpret_cast<long long*>(iout + k),
                               _mm256_cmpgt_epi64(rv, _mm256_setr_epi64x(0, 1, 2, 3)), lo);
        _mm256_maskstore_epi64(reinterpret_cast<long long*>(iout + k + 4),
                               _mm256_cmpgt_epi64(rv, _mm256_setr_epi64x(4, 5, 6, 7)), hi);
      }
    }
    __m256i gap = _mm256_and_si256(
        _mm256_sub_epi32(_mm256_sub_epi32(cur, prev), _mm256_set1_epi32(1)), live);
    if (r >= 2 && _mm256_testz_si256(gap, small)) {
      s = squeeze14(s, _mm_packus_epi32(_mm256_castsi256_si128(gap),
                                        _mm256_extracti128_si256(gap, 1)), r);
    } else {
      alignas(32) uint32_t g[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(g), gap);
      for (size_t i = 0; i < r; ++i) s = put56(s, g[i]);
    }
  }
  const __m256d vscale = _mm256_set1_pd(value_scale), vinv = _mm256_set1_pd(1.0 / value_scale);
  const __m256i small64 = _mm256_set1_epi64x(~int64_t{0x3FFF});
  const __m256i small21 = _mm256_set1_epi64x(~int64_t{0x1FFFFF});
  for (size_t k = 0; k < n; k += 8) {  // values of positions [k, k + 8)
    size_t r = n - k < 8 ? n - k : 8;
    Quad a = value_quad(k, n, idx, val, vscale, vinv, pidx, pq, pn);
    Quad b = value_quad(k + 4, n, idx, val, vscale, vinv, pidx, pq, pn);
    if (!_mm256_testz_si256(_mm256_or_si256(a.bad, b.bad), _mm256_or_si256(a.bad, b.bad)))
        [[unlikely]] {
      // A magnitude of 2^51 or more (or not finite): exact quantisation.
      int64_t pred[8];
      if (pn) predict_scalar(idx, k, r, pidx, pq, pn, pred);
      for (size_t i = 0; i < r; ++i) {
        int64_t q;
        if (!quantise(val[k + i], value_scale, q)) return {nullptr, nullptr};
        if (qout) qout[k + i] = q;
        uint64_t d = static_cast<uint64_t>(q) - static_cast<uint64_t>(pn ? pred[i] : 0);
        v = put(v, (d << 1) ^ static_cast<uint64_t>(static_cast<int64_t>(d) >> 63));
      }
      continue;
    }
    if (qout) {
      if (r == 8) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qout + k), a.q);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qout + k + 4), b.q);
      } else {
        const __m256i lanes = _mm256_setr_epi64x(0, 1, 2, 3);
        __m256i nv = _mm256_set1_epi64x(static_cast<int64_t>(n));
        _mm256_maskstore_epi64(
            reinterpret_cast<long long*>(qout + k),
            _mm256_cmpgt_epi64(nv, _mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(k)), lanes)),
            a.q);
        _mm256_maskstore_epi64(
            reinterpret_cast<long long*>(qout + k + 4),
            _mm256_cmpgt_epi64(nv, _mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(k + 4)), lanes)),
            b.q);
      }
    }
    const __m256i both = _mm256_or_si256(a.zz, b.zz);
    if (r >= 2 && _mm256_testz_si256(both, small64)) {
      v = squeeze14(v, pack16(a.zz, b.zz), r);
    } else if (_mm256_testz_si256(both, small21)) {  // e.g. unpredictable values
      const __m256i lows = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
      v = squeeze21(v, _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(a.zz, lows)),
                    r < 4 ? r : 4);
      if (r > 4)
        v = squeeze21(v, _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(b.zz, lows)), r - 4);
    } else {
      alignas(32) uint64_t z[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(z), a.zz);
      _mm256_store_si256(reinterpret_cast<__m256i*>(z + 4), b.zz);
      const __m256i big56 = _mm256_set1_epi64x(~((int64_t{1} << 56) - 1));
      if (_mm256_testz_si256(_mm256_or_si256(a.zz, b.zz), big56)) {
        for (size_t i = 0; i < r; ++i) v = put56(v, z[i]);
      } else {
        for (size_t i = 0; i < r; ++i) v = put(v, z[i]);
      }
    }
  }
  return {s, v};
}
#else
// Format version 2 (docs/logger.md): the structure varints at s, the value
// varints at v, each value as ZigZag(q - prediction) with predictions from
// the previous record (pidx/pq/pn; pn == 0: none, every prediction 0). q of
// each value goes to qout and each index to iout (when not null: the
// FrameState arena's slots, int64).
// Returns {nullptr, nullptr} when the indices are not strictly increasing or
// a value does not quantise (the caller explains).
BodyEnds encode_body_v2(uint8_t* s, uint8_t* v, uint32_t sid, uint64_t zz_delta,
                        double value_scale, const uint32_t* idx, const double* val, size_t n,
                        const int64_t* pidx, const int64_t* pq, size_t pn, int64_t* qout,
                        int64_t* iout) {
  s = put56(s, sid);
  s = put(s, zz_delta);
  s = put56(s, n);
  if (n == 0) return {s, v};
  s = put(s, idx[0]);
  if (iout)  // for the next record's predictor (the arena keeps int64)
    for (size_t i = 0; i < n; ++i) iout[i] = idx[i];
  constexpr size_t kBlock = 64;
  uint32_t gaps[kBlock];
  for (size_t b = 1; b < n; b += kBlock) {
    size_t m = n - b < kBlock ? n - b : kBlock;
    uint32_t bad = 0;
    for (size_t k = 0; k < m; ++k) {
      uint32_t cur = idx[b + k], prev = idx[b + k - 1];
      bad |= static_cast<uint32_t>(cur <= prev);
      gaps[k] = cur - prev - 1;
    }
    if (bad) [[unlikely]]
      return {nullptr, nullptr};
    for (size_t k = 0; k < m; ++k) s = put56(s, gaps[k]);
  }
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  const int64_t magic_bits = std::bit_cast<int64_t>(kMagic);
  int64_t qlocal[kBlock], pred[kBlock];
  uint64_t zz[kBlock];
  for (size_t b = 0; b < n; b += kBlock) {
    size_t m = n - b < kBlock ? n - b : kBlock;
    int64_t* q = qout ? qout + b : qlocal;
    // Quantisation as in encode_body: the magic-number rounding for
    // |r| < 2^51, the exact scalar path for a block with anything larger.
    int64_t out_of_range = 0;
    for (size_t k = 0; k < m; ++k) {
      double r = val[b + k] / value_scale;
      out_of_range |= static_cast<int64_t>(!(std::fabs(r) < 2251799813685248.0));  // 2^51
      q[k] = std::bit_cast<int64_t>(r + kMagic) - magic_bits;
    }
    if (out_of_range) [[unlikely]] {
      for (size_t k = 0; k < m; ++k)
        if (!quantise(val[b + k], value_scale, q[k])) return {nullptr, nullptr};
    }
    if (pn) {
      predict_scalar(idx, b, m, pidx, pq, pn, pred);
    } else {
      for (size_t k = 0; k < m; ++k) pred[k] = 0;
    }
    // Wrapping difference, undone by the decoder's wrapping sum.
    uint64_t big = 0;
    for (size_t k = 0; k < m; ++k) {
      uint64_t d = static_cast<uint64_t>(q[k]) - static_cast<uint64_t>(pred[k]);
      uint64_t z = (d << 1) ^ static_cast<uint64_t>(static_cast<int64_t>(d) >> 63);
      zz[k] = z;
      big |= z;
    }
    if (big < 0x80) {  // well-predicted values: every varint is its one byte
      for (size_t k = 0; k < m; ++k) v[k] = static_cast<uint8_t>(zz[k]);
      v += m;
    } else if (big < (uint64_t{1} << 56)) {
      for (size_t k = 0; k < m; ++k) v = put56(v, zz[k]);
    } else {
      for (size_t k = 0; k < m; ++k) v = put(v, zz[k]);
    }
  }
  return {s, v};
}
#endif  // A2PACK_LOGGER_AVX2

}  // namespace a2pack::logger::A2PACK_LOGGER_NS

#if defined(A2PACK_LOGGER_FEATURES)
A2PACK_TARGET_END
#endif
#if !defined(__clang__)
#pragma GCC pop_options
#endif
#endif  // A2PACK_LOGGER_NS
