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
// latency (~100 ns) at a few ns per row. Measured on the first development
// VM (Intel Xeon, 10 M rows, 4 096-row batches): distance 16 gathered 2.2x
// faster than the plain loop, 32 2.5x; on the Zen 4 VM with the L2 hint
// below, 64 gathered 4 096 rows in 23.0 us on one thread where 32 took 30.1
// (bench_dataset BM_Gather_A2pack/1, same minute, plain loop 45-53 us).
inline constexpr size_t kPrefetchAhead = 64;

// Prefetch the row at index i into L2 (prefetcht1), not L1. On AMD Zen 4 a
// prefetch into L1 holds one of the few L1 miss buffers until its line
// arrives, so the prefetches of a gather queue behind each other; into L2
// they use the L2's own, larger miss queue and ~2x more rows are in flight.
// Measured on the Zen 4 VM (one thread, 10 M rows, 4 096-row batches,
// median us per batch): plain loop 34.7, prefetcht0 at distance 16/32/64
// 38.5/36.2/39.1, prefetcht1 at 32/64/128 22.5/21.7/22.5, prefetchnta 36.5.
// The copy then reads L2 (a few ns), which the loop hides.
inline void prefetch_row(const uint8_t* base, int64_t i) {
  __builtin_prefetch(base + static_cast<size_t>(i) * kRowBytes, 0, 2);
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

// Rows of the chunks `claim` hands out (chunk c covers batch positions
// [c * per, min(n, (c + 1) * per))), each passed to emit(i, row) with i its
// position in the batch; claim() returns the chunk count when none is left.
// A thread claims its next chunk as soon as it starts one, and the last
// kPrefetchAhead rows of a chunk prefetch the first rows of the next, so the
// prefetch stream never drains at a chunk boundary. Chunks can then be small
// enough that the threads of a split gather finish within a couple of
// microseconds of each other (with 512-row chunks the last one left one
// thread alone for up to ~9 us). `per` must be at least kPrefetchAhead.
template <typename Claim, typename Emit>
inline void gather_chunks(const uint8_t* base, const int64_t* idx, size_t n, size_t per,
                          const Claim& claim, Emit&& emit) {
  const size_t chunks = (n + per - 1) / per;
  size_t c = claim();
  if (c >= chunks) return;
  size_t a = c * per, b = a + per < n ? a + per : n;
  for (size_t i = a; i < b && i < a + kPrefetchAhead; ++i) prefetch_row(base, idx[i]);
  for (;;) {
    const size_t nc = claim();
    const size_t na = nc < chunks ? nc * per : 0;
    const size_t nb = nc < chunks ? (na + per < n ? na + per : n) : 0;
    const size_t mid = b - a > kPrefetchAhead ? b - kPrefetchAhead : a;
    size_t i = a;
    for (; i < mid; ++i) {
      prefetch_row(base, idx[i + kPrefetchAhead]);
      emit(i, base + static_cast<size_t>(idx[i]) * kRowBytes);
    }
    for (size_t j = na; i < b; ++i) {  // this chunk's tail starts the next one's prefetches
      if (j < nb) prefetch_row(base, idx[j++]);
      emit(i, base + static_cast<size_t>(idx[i]) * kRowBytes);
    }
    if (nc >= chunks) return;
    a = na;
    b = nb;
  }
}

// The whole batch on the calling thread: gather_chunks with one chunk.
template <typename Emit>
inline void gather_all(const uint8_t* base, const int64_t* idx, size_t n, Emit&& emit) {
  size_t claims = 0;
  gather_chunks(base, idx, n, n > kPrefetchAhead ? n : kPrefetchAhead,
                [&claims] { return claims++; }, emit);
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
