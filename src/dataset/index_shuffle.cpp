#include "dataset/index_shuffle.hpp"

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "base/splitmix.hpp"

namespace a2pack::dataset {

namespace {

// The round function: a 32-bit hash of (part, key) (two multiply-xorshift
// steps). Only its low bits are used, and the xorshifts bring the product's
// high bits (which depend on every bit of the input) down to them.
inline uint32_t round_hash(uint32_t v, uint32_t k) {
  uint32_t h = (v ^ k) * 0x9E3779B1u;
  h ^= h >> 15;
  h *= 0x85EBCA77u;
  h ^= h >> 13;
  return h;
}

struct Rounds {
  uint32_t lo_bits, lo_mask, hi_mask;
  const uint32_t* keys;
};

// The network over v[0..len) in place. GCC's vector types keep it portable
// (eight lanes, SSE2 or NEON at worst); target_clones adds an AVX2 build
// picked at load time, whose 32-bit multiplies take one instruction.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void permute(const Rounds& r, uint32_t* v, size_t len) {
  typedef uint32_t u8 __attribute__((vector_size(32)));
  const uint32_t lb = r.lo_bits;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    u8 x;
    std::memcpy(&x, v + i, sizeof x);
    for (int k = 0; k < IndexShuffle::kRounds; ++k) {
      const uint32_t key = r.keys[k];
      u8 src = (k % 2 == 0) ? (x >> lb) : (x & r.lo_mask);
      u8 h = (src ^ key) * 0x9E3779B1u;
      h ^= h >> 15;
      h *= 0x85EBCA77u;
      h ^= h >> 13;
      x ^= (k % 2 == 0) ? (h & r.lo_mask) : ((h & r.hi_mask) << lb);
    }
    std::memcpy(v + i, &x, sizeof x);
  }
  for (; i < len; ++i) {
    uint32_t x = v[i];
    for (int k = 0; k < IndexShuffle::kRounds; ++k) {
      if (k % 2 == 0)
        x ^= round_hash(x >> lb, r.keys[k]) & r.lo_mask;
      else
        x ^= (round_hash(x & r.lo_mask, r.keys[k]) & r.hi_mask) << lb;
    }
    v[i] = x;
  }
}

}  // namespace

IndexShuffle::IndexShuffle(uint64_t n, uint64_t seed, uint64_t epoch) : n_(n) {
  if (n > (uint64_t{1} << 32))
    fail(A2PACK_E_UNSUPPORTED, "index shuffle: at most 2^32 positions, got {}", n);
  uint32_t bits = 0;
  while ((uint64_t{1} << bits) < n) ++bits;
  lo_bits_ = (bits + 1) / 2;
  const uint32_t hi_bits = bits - lo_bits_;
  lo_mask_ = static_cast<uint32_t>((uint64_t{1} << lo_bits_) - 1);
  hi_mask_ = static_cast<uint32_t>((uint64_t{1} << hi_bits) - 1);
  // Keys of (seed, epoch), drawn as the stored permutation's generator is
  // seeded, so that the two shuffles share nothing but their inputs.
  SplitMix64 rng{seed * 0xA24BAED4963EE407ull ^ (epoch + 1) * 0x9FB21C651E98DF25ull};
  for (auto& k : keys_) k = static_cast<uint32_t>(rng.next() >> 32);
}

uint32_t IndexShuffle::at(uint32_t i) const {
  const Rounds r{lo_bits_, lo_mask_, hi_mask_, keys_};
  uint32_t x = i;
  do permute(r, &x, 1);
  while (x >= n_);
  return x;
}

void IndexShuffle::fill(uint64_t start, size_t len, uint32_t* out) const {
  if (start > n_ || len > n_ - start)
    fail(A2PACK_E_INTERNAL, "index shuffle: positions {}..{} past {}", start, start + len, n_);
  const Rounds r{lo_bits_, lo_mask_, hi_mask_, keys_};
  // A chunk at a time, its walk lists on the stack: a fill allocates
  // nothing.
  constexpr size_t kChunk = 1024;
  uint32_t at[kChunk], walk[kChunk];
  for (size_t c = 0; c < len; c += kChunk) {
    uint32_t* v = out + c;
    const size_t m = std::min(kChunk, len - c);
    for (size_t i = 0; i < m; ++i) v[i] = static_cast<uint32_t>(start + c + i);
    permute(r, v, m);
    // Cycle-walk the values past n: gather them, run them through the
    // network again together (vectorised), put back those now inside,
    // repeat; each pass keeps fewer than half of them on average. The lists
    // are kept without branches: up to half of the values walk, at random,
    // and a branch on each would mispredict as often.
    size_t k = 0;
    for (size_t i = 0; i < m; ++i) {
      at[k] = static_cast<uint32_t>(i);
      k += v[i] >= n_;
    }
    while (k > 0) {
      for (size_t j = 0; j < k; ++j) walk[j] = v[at[j]];
      permute(r, walk, k);
      size_t kept = 0;
      for (size_t j = 0; j < k; ++j) {
        v[at[j]] = walk[j];
        at[kept] = at[j];
        kept += walk[j] >= n_;
      }
      k = kept;
    }
  }
}

}  // namespace a2pack::dataset
