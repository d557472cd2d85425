// The batch gather kernels: random rows out of the in-memory array, with
// software prefetching so that many cache misses are in flight at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dataset/row.hpp"

namespace a2pack::dataset {

// How many rows ahead to prefetch: enough misses in flight to cover DRAM
// latency (~100 ns) at a few ns per row. Measured on the development VM over
// 10 M rows (4 096-row batches): distance 16 gathers 2.2x faster than the
// plain loop, 32 2.5x. Distance 64 with the non-temporal hint looked better
// in a stand-alone loop but, inside bench_dataset, made the row gather 1.25x
// and the column gather 3x slower than this (same binary otherwise, same
// minute), so the rows are prefetched into all cache levels.
inline constexpr size_t kPrefetchAhead = 32;

// Prefetch the row at index i.
inline void prefetch_row(const uint8_t* base, int64_t i) {
  __builtin_prefetch(base + static_cast<size_t>(i) * kRowBytes, 0, 3);
}

// Index of the first idx[i] outside [0, rows), or n when all are inside.
// Every batch gather runs this before copying anything, so it must cost
// little next to the gather itself (a plain loop took 4 us of a 50 us
// 4 096-row batch). The test is branch-free and vectorises with plain
// integer ops: for rows >= 1, idx | (rows - 1 - idx) has its sign bit set
// exactly when idx < 0 or idx >= rows (rows <= 2^63 - 1; the subtraction
// wraps). GCC vector types keep it portable;
// target_clones adds an AVX2 build picked at load time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
inline size_t first_out_of_range(const int64_t* idx, size_t n, uint64_t rows) {
  if (rows == 0) return n ? 0 : n;
  const uint64_t lim = rows - 1;
  typedef uint64_t u4 __attribute__((vector_size(32)));
  u4 acc0 = {0, 0, 0, 0}, acc1 = acc0, acc2 = acc0, acc3 = acc0;
  const u4 vlim = {lim, lim, lim, lim};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    u4 a, b, c, d;
    std::memcpy(&a, idx + i, sizeof a);
    std::memcpy(&b, idx + i + 4, sizeof b);
    std::memcpy(&c, idx + i + 8, sizeof c);
    std::memcpy(&d, idx + i + 12, sizeof d);
    acc0 |= a | (vlim - a);
    acc1 |= b | (vlim - b);
    acc2 |= c | (vlim - c);
    acc3 |= d | (vlim - d);
  }
  acc0 |= acc1 | acc2 | acc3;
  uint64_t bad = acc0[0] | acc0[1] | acc0[2] | acc0[3];
  for (; i < n; ++i) {
    uint64_t x = static_cast<uint64_t>(idx[i]);
    bad |= x | (lim - x);
  }
  if (!(bad >> 63)) return n;
  for (size_t j = 0; j < n; ++j)
    if (static_cast<uint64_t>(idx[j]) >= rows) return j;
  return n;
}

// Rows idx[0..n) of `base` to `out`, 32 bytes each. Indices must be checked.
inline void gather_rows(const uint8_t* base, const int64_t* idx, size_t n, uint8_t* out) {
  const size_t pre = n < kPrefetchAhead ? n : kPrefetchAhead;
  for (size_t i = 0; i < pre; ++i) prefetch_row(base, idx[i]);
  size_t i = 0;
  for (; i + kPrefetchAhead < n; ++i) {
    prefetch_row(base, idx[i + kPrefetchAhead]);
    std::memcpy(out + i * kRowBytes, base + static_cast<size_t>(idx[i]) * kRowBytes, kRowBytes);
  }
  for (; i < n; ++i)
    std::memcpy(out + i * kRowBytes, base + static_cast<size_t>(idx[i]) * kRowBytes, kRowBytes);
}

// The 16 tile exponents of a board, cell 0 (top-left, the high nibble) first.
inline void unpack_exponents(uint64_t board, uint8_t* out) {
#if defined(__SSE2__)
  // Byte-swapped, byte k holds cells 2k (high nibble) and 2k+1 (low nibble):
  // split the nibbles and interleave them.
  __m128i v = _mm_cvtsi64_si128(static_cast<long long>(__builtin_bswap64(board)));
  const __m128i mask = _mm_set1_epi8(0x0F);
  __m128i lo = _mm_and_si128(v, mask);
  __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi8(hi, lo));
#else
  for (unsigned i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>((board >> (60 - 4 * i)) & 0xF);
#endif
}

}  // namespace a2pack::dataset
