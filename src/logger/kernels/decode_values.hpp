// What the decoder's kernels share (kernels/decode.cpp and decode_bulk.cpp):
// the four-lane predictor over unpadded records, the varint window cursor,
// int64 -> double, and a stream's scales. Internal linkage, included inside
// each kernel unit's target region after the headers it uses (as
// kernels/predict.hpp is); it reads A2PACK_LOGGER_PEXT and A2PACK_LOGGER_AVX2,
// which the including unit sets. decoder.cpp includes it outside any region
// for the portable Scaling.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/varint.hpp"
#include "logger/decoder.hpp"
#include "logger/kernels/kernels.hpp"
#include "logger/kernels/predict.hpp"

namespace a2pack::logger {
namespace {

#ifdef A2PACK_LOGGER_AVX2
// The decoder's predictions for positions [k, k + 4), lanes at or past n
// zero: the previous record's indices are u32 in the output column, with no
// padding around them (the encoder's padded arena has predict4_padded), so
// near the ends of either record everything is read with masked loads
// (masked lanes read nothing and load as 0) and nothing outside [idx, idx +
// n), [pidx, pidx + pn) and [pq, pq + pn) is touched. Requires pn >= 1.
[[gnu::always_inline]] inline __m256i predict4(size_t k, size_t n, const uint32_t* idx,
                                              const uint32_t* pidx, const int64_t* pq,
                                              size_t pn) {
  if (k >= 1 && k + 5 <= pn && k + 4 <= n) {
    // Inside both records (the usual case past the first group): every
    // neighbour exists, no masks needed.
    const __m256i c = _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(idx + k)));
    __m256i pred = _mm256_setzero_si256();
    for (int o = -1; o <= 1; ++o) {
      const uint32_t* ip = pidx + static_cast<ptrdiff_t>(k) + o;
      const int64_t* qp = pq + static_cast<ptrdiff_t>(k) + o;
      __m256i pi = _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ip)));
      __m256i pv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qp));
      pred = _mm256_or_si256(pred, _mm256_and_si256(_mm256_cmpeq_epi64(pi, c), pv));
    }
    return pred;
  }
  const __m256i kv = _mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(k)),
                                      _mm256_setr_epi64x(0, 1, 2, 3));
  const __m256i live = _mm256_cmpgt_epi64(_mm256_set1_epi64x(static_cast<int64_t>(n)), kv);
  const __m256i vpn = _mm256_set1_epi64x(static_cast<int64_t>(pn));
  const __m256i c = _mm256_cvtepu32_epi64(
      k + 4 <= n ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(idx + k))
                 : _mm_maskload_epi32(reinterpret_cast<const int*>(idx + k), narrow_mask(live)));
  __m256i pred = _mm256_setzero_si256();
  for (int o = -1; o <= 1; ++o) {
    __m256i pos = _mm256_add_epi64(kv, _mm256_set1_epi64x(o));
    __m256i ok = _mm256_and_si256(_mm256_and_si256(live, _mm256_cmpgt_epi64(vpn, pos)),
                                  _mm256_cmpgt_epi64(pos, _mm256_set1_epi64x(-1)));
    // Pointer arithmetic only: lane -1 of position 0 is masked, never read.
    const int64_t* qp = pq + static_cast<ptrdiff_t>(k) + o;
    const uint32_t* ip = pidx + static_cast<ptrdiff_t>(k) + o;
    __m256i pi = _mm256_cvtepu32_epi64(
        _mm_maskload_epi32(reinterpret_cast<const int*>(ip), narrow_mask(ok)));
    __m256i pv = _mm256_maskload_epi64(reinterpret_cast<const long long*>(qp), ok);
    // At most one neighbour matches (indices ascend); masked lanes add 0.
    pred = _mm256_or_si256(pred, _mm256_and_si256(_mm256_cmpeq_epi64(pi, c), pv));
  }
  return pred;
}
#endif

// A cursor over the varints of a frame. Reading varints one after another
// makes each start position wait for the previous length (load, find the
// terminator, add): a dependency chain of ~12 cycles per varint. Instead the
// cursor takes a 64-byte window, computes the bit mask of its terminator
// bytes (top bit clear) with four SSE2 movemasks, and walks the mask: each
// varint's end is the next set bit, so the only chain left is clearing the
// lowest bit. Each varint is then extracted with one 8-byte load (pext, or
// three shift-and-mask steps). Within 72 bytes of the frame's end it falls
// back to checked byte-wise reads.
class Reader {
 public:
  Reader(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}
  const uint8_t* pos() const { return p_; }
  const uint8_t* end() const { return end_; }

  // The next varint as a u64; throws (naming record `rec`) when malformed.
  [[gnu::always_inline]] inline uint64_t next(uint32_t rec) {
    if (term_ == 0) [[unlikely]] {
      // The helpers take and return plain values: the cursor's address never
      // escapes, so its fields stay in registers.
      Refill f = refill(p_, end_, rec);
      if (!f.windowed) {
        p_ = f.p;
        return f.value;
      }
      win_ = p_;
      term_ = f.term;
    }
    unsigned e = static_cast<unsigned>(__builtin_ctzll(term_));
    term_ &= term_ - 1;
    const uint8_t* s = p_;
    p_ = win_ + e + 1;
    size_t len = static_cast<size_t>(p_ - s);
    if (len > 8) [[unlikely]]
      return long_varint(s, p_, end_, rec);
    uint64_t x;
    std::memcpy(&x, s, 8);
    x &= kByteMask[len];
#ifdef A2PACK_LOGGER_PEXT
    return _pext_u64(x, 0x7F7F7F7F7F7F7F7Full);
#else
    x &= 0x7F7F7F7F7F7F7F7Full;
    x = ((x & 0x7F007F007F007F00ull) >> 1) | (x & 0x007F007F007F007Full);
    x = ((x & 0x3FFF00003FFF0000ull) >> 2) | (x & 0x00003FFF00003FFFull);
    x = ((x & 0x0FFFFFFF00000000ull) >> 4) | (x & 0x000000000FFFFFFFull);
    return x;
#endif
  }

 private:
  static constexpr size_t kWindow = 64;
  static constexpr uint64_t kByteMask[9] = {0,
                                            0xFFull,
                                            0xFFFFull,
                                            0xFFFFFFull,
                                            0xFFFFFFFFull,
                                            0xFFFFFFFFFFull,
                                            0xFFFFFFFFFFFFull,
                                            0xFFFFFFFFFFFFFFull,
                                            ~0ull};

  // Terminator bits of the window at win_: bit i set when win_[i] < 0x80.
  static uint64_t terminators(const uint8_t* w) {
#if defined(__SSE2__)
    uint64_t m = 0;
    for (int k = 0; k < 4; ++k) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * k));
      m |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(v))) << (16 * k);
    }
    return ~m;
#else
    uint64_t m = 0;
    for (int k = 0; k < 8; ++k) {
      uint64_t x;
      std::memcpy(&x, w + 8 * k, 8);
      // Gather the eight top bits into one byte.
      m |= (((x & 0x8080808080808080ull) * 0x0002040810204081ull) >> 56) << (8 * k);
    }
    return ~m;
#endif
  }

  struct Refill {
    bool windowed;      // a new window starts at p: term is its terminator mask
    uint64_t term;
    const uint8_t* p;   // otherwise: the position after the varint read byte-wise
    uint64_t value;
  };

  // No terminator left in the window: open a new one at p, or (within 72
  // bytes of the end) read one varint byte-wise.
  [[gnu::noinline]] static Refill refill(const uint8_t* p, const uint8_t* end, uint32_t rec) {
    if (static_cast<size_t>(end - p) >= kWindow + 8) {
      uint64_t term = terminators(p);
      if (term == 0) bad_record(rec, "no varint ends within 64 bytes");
      return {true, term, p, 0};
    }
    uint64_t v;
    auto r = varint::read<64>(p, end, v);
    if (r != varint::Result::ok)
      bad_record(rec, r == varint::Result::truncated ? "varint runs past the end of the frame"
                                                     : "overlong varint");
    return {false, 0, p, v};
  }

  // A 9- or 10-byte varint found in the window [s, e): decode it checked.
  [[gnu::noinline]] static uint64_t long_varint(const uint8_t* s, const uint8_t* e,
                                               const uint8_t* end, uint32_t rec) {
    uint64_t v;
    if (varint::read<64>(s, end, v) != varint::Result::ok || s != e)
      bad_record(rec, "overlong varint");
    return v;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* win_ = nullptr;
  uint64_t term_ = 0;
};

// int64 -> double without cvtsi2sd: that instruction writes only the low
// half of its register, so in a loop it waits for the previous iteration's
// result in the same register (a 14-cycle divide here). For |q| < 2^51 the
// value sits in the mantissa of 1.5 * 2^52 + q, exactly.
[[gnu::always_inline]] inline double to_double(int64_t q) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  if (static_cast<uint64_t>(q) + (uint64_t{1} << 51) < (uint64_t{1} << 52)) [[likely]]
    return std::bit_cast<double>(std::bit_cast<int64_t>(kMagic) + q) - kMagic;
  return static_cast<double>(q);
}

// k when 1/scale is an integer k (to 1e-9), else 0. Scales are usually
// decimal fractions (1e-3, 1e-6); q / 1000 is the double nearest the decimal
// the caller recorded (0.65), where q * 0.001 can be one ulp off
// (0.6500000000000001). Both are within scale/2; division reads better.
inline double divisor_of(double scale) {
  double inv = 1.0 / scale;
  if (!(inv >= 1.0 && inv < 9007199254740992.0)) return 0;
  double k = static_cast<double>(static_cast<int64_t>(inv + 0.5));
  return std::fabs(inv - k) <= 1e-9 * k ? k : 0;
}

// x / k, correctly rounded, where k is a divisor_of() result. The AVX2
// build has no division here: vdivpd takes 8 cycles per four lanes on the
// CPUs it targets, longer than the rest of a value's decode. y = x * (1/k)
// is within an ulp of x / k, the FMA residual x - y * k is exact, and one
// correction y + residual * (1/k) is the correctly rounded quotient
// (Markstein's theorem: 1/k is a normal double rounded to nearest, and for
// k >= 1 nothing overflows or underflows), so both builds give the same
// bits (test: LoggerV2.DecodedValuesAreTheCorrectlyRoundedQuotient).
#ifdef A2PACK_LOGGER_AVX2
[[gnu::always_inline]] inline __m256d div_by4(__m256d x, __m256d k, __m256d inv) {
  __m256d y = _mm256_mul_pd(x, inv);
  return _mm256_fmadd_pd(_mm256_fnmadd_pd(y, k, x), inv, y);
}
[[gnu::always_inline]] inline double div_by(double x, double k, double inv) {
  __m128d xv = _mm_set_sd(x), kv = _mm_set_sd(k), iv = _mm_set_sd(inv);
  __m128d y = _mm_mul_sd(xv, iv);
  return _mm_cvtsd_f64(_mm_fmadd_sd(_mm_fnmadd_sd(y, kv, xv), iv, y));
}
#else
inline double div_by(double x, double k, double) { return x / k; }
#endif

// A stream's scales as every parser applies them: q / k when the scale is
// 1/k for an integer k (divisor_of; the double nearest the decimal the
// caller recorded), else q * scale. The divisors and their reciprocals (for
// div_by) are worked out once per stream and frame.
struct Scaling {
  double value_div = 0, value_inv = 0, value_scale = 0;
  double epoch_div = 0, epoch_inv = 0, epoch_scale = 0;
  static Scaling of(const StreamInfo& s) {
    Scaling c;
    c.value_scale = s.value_scale;
    c.epoch_scale = s.epoch_scale;
    c.value_div = divisor_of(s.value_scale);
    c.epoch_div = divisor_of(s.epoch_scale);
    c.value_inv = c.value_div != 0 ? 1.0 / c.value_div : 0;
    c.epoch_inv = c.epoch_div != 0 ? 1.0 / c.epoch_div : 0;
    return c;
  }
  double value(double q) const {
    return value_div != 0 ? div_by(q, value_div, value_inv) : q * value_scale;
  }
  double epoch(uint64_t tick) const {
    const double t = to_double(static_cast<int64_t>(tick));
    return epoch_div != 0 ? div_by(t, epoch_div, epoch_inv) : t * epoch_scale;
  }
};

#ifdef A2PACK_LOGGER_AVX2
// ZigZag-decode four u64 lanes.
[[gnu::always_inline]] inline __m256i zigzag4(__m256i z) {
  return _mm256_xor_si256(_mm256_srli_epi64(z, 1),
                          _mm256_sub_epi64(_mm256_setzero_si256(),
                                           _mm256_and_si256(z, _mm256_set1_epi64x(1))));
}

// Four quantised values q to ov[0, 4): sc.value() of each, kDivide telling
// which of its two forms applies. For |q| < 2^51 in every lane the
// 1.5 * 2^52 magic-number conversion is exact; otherwise lane by lane.
template <bool kDivide>
[[gnu::always_inline]] inline void store_values4(__m256i q, double* ov, const Scaling& sc) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  const __m256i biased = _mm256_add_epi64(q, _mm256_set1_epi64x(int64_t{1} << 51));
  if (!_mm256_testz_si256(biased, _mm256_set1_epi64x(~((int64_t{1} << 52) - 1)))) [[unlikely]] {
    alignas(32) int64_t qv[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(qv), q);
    for (size_t i = 0; i < 4; ++i) {
      const double x = static_cast<double>(qv[i]);
      ov[i] = kDivide ? div_by(x, sc.value_div, sc.value_inv) : x * sc.value_scale;
    }
    return;
  }
  __m256d x = _mm256_sub_pd(
      _mm256_castsi256_pd(_mm256_add_epi64(q, _mm256_castpd_si256(_mm256_set1_pd(kMagic)))),
      _mm256_set1_pd(kMagic));
  x = kDivide ? div_by4(x, _mm256_set1_pd(sc.value_div), _mm256_set1_pd(sc.value_inv))
              : _mm256_mul_pd(x, _mm256_set1_pd(sc.value_scale));
  _mm256_storeu_pd(ov, x);
}
#endif

}  // namespace
}  // namespace a2pack::logger
