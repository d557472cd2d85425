// Format version 2's value predictor, the parts the encoder's and the
// decoder's kernels share (kernels/encode.cpp, decode.cpp, decode_bulk.cpp).
// Internal linkage: each kernel translation unit includes it inside its
// target region (kernels/target_region.hpp), after the headers it uses, so
// each instruction-set build has its own copy compiled for that build. It
// reads A2PACK_LOGGER_AVX2, which the including unit sets.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace a2pack::logger {
namespace {

// Format version 2's value predictions (docs/logger.md) for positions
// [b, b + m) of a record with indices idx: the previous record's quantised
// value at position k - 1, k or k + 1 whose index equals idx[k], else 0
// (indices ascend, so at most one matches). A replaced index shifts the
// positions between its old and new place by one, so the window still finds
// them. Branch-free up to position pn: both lists are read without
// data-dependent branches; past it every neighbour lies beyond the previous
// record, the prediction is 0 and nothing is read (a record may be far
// longer than the one predicting it). The caller guarantees pn >= 1 and that
// pidx[k + 1] and pq[k + 1] are readable for every k <= pn (their lanes at
// or past pn are masked out).
// The previous record's indices are u32 (the decoder's output) or int64 (the
// encoder's padded arena): I is their type.
template <typename I>
inline void predict_scalar(const uint32_t* idx, size_t b, size_t m, const I* pidx,
                           const int64_t* pq, size_t pn, int64_t* pred) {
  size_t t = 0;
  if (b == 0 && m > 0) {  // position 0 has no left neighbour
    const I c = idx[0];
    int64_t p = pidx[0] == c ? pq[0] : 0;
    p = ((1 < pn) & (pidx[1] == c)) ? pq[1] : p;
    pred[0] = p;
    t = 1;
  }
  for (; t < m; ++t) {
    size_t k = b + t;
    if (k > pn) {
      for (; t < m; ++t) pred[t] = 0;
      break;
    }
    const I c = idx[k];
    int64_t p = ((k - 1 < pn) & (pidx[k - 1] == c)) ? pq[k - 1] : 0;
    p = ((k < pn) & (pidx[k] == c)) ? pq[k] : p;
    p = ((k + 1 < pn) & (pidx[k + 1] == c)) ? pq[k + 1] : p;
    pred[t] = p;
  }
}

#ifdef A2PACK_LOGGER_AVX2
// The 32-bit mask of four 64-bit lane masks (for 32-bit masked loads).
inline __m128i narrow_mask(__m256i m) {
  return _mm256_castsi256_si128(
      _mm256_permutevar8x32_epi32(m, _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0)));
}

// Predictions for positions [k, k + 4) from a padded arena (FrameState; the
// encoder's and the bulk decoder's): int64 indices with -1 sentinels before
// each record and in the kTail slots after it, so for k <= pn every neighbour k - 1 .. k + 4 is
// read with a plain load and a read past the record meets a sentinel, which
// never equals a zero-extended u32 index: the same predictions as predict4
// without its masks. Past k > pn every neighbour is beyond the previous
// record. Lanes at or past n may hold anything (the caller masks them).
[[gnu::always_inline]] inline __m256i predict4_padded(size_t k, size_t n, const uint32_t* idx,
                                                      const int64_t* pidx, const int64_t* pq,
                                                      size_t pn) {
  if (k > pn) return _mm256_setzero_si256();
  __m256i c;
  if (k + 4 <= n) {
    c = _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(idx + k)));
  } else {  // the caller's array ends inside this group: read only its lanes
    const __m256i live = _mm256_cmpgt_epi64(
        _mm256_set1_epi64x(static_cast<int64_t>(n)),
        _mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(k)), _mm256_setr_epi64x(0, 1, 2, 3)));
    c = _mm256_cvtepu32_epi64(
        _mm_maskload_epi32(reinterpret_cast<const int*>(idx + k), narrow_mask(live)));
  }
  __m256i pred = _mm256_setzero_si256();
  for (int o = -1; o <= 1; ++o) {
    const ptrdiff_t at = static_cast<ptrdiff_t>(k) + o;
    __m256i pi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pidx + at));
    __m256i pv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pq + at));
    pred = _mm256_or_si256(pred, _mm256_and_si256(_mm256_cmpeq_epi64(pi, c), pv));
  }
  return pred;
}
#endif

}  // namespace
}  // namespace a2pack::logger
