// A stateless shuffle: a keyed bijection of [0, n), so that position i of an
// epoch's order is computed from (seed, epoch, i) alone and no permutation is
// ever stored. A shuffled feed over a billion rows then holds nothing that
// grows with the rows, and its first batch costs no O(n) preparation.
//
// The bijection is an unbalanced Feistel network over the smallest power of
// two 2^b >= n, with the b bits split into a high and a low part: each round
// XORs one part with a keyed hash of the other (a step that is its own
// inverse, whatever the parts' widths), alternating parts. Values that land
// at or past n walk on through the network until they fall inside
// ("cycle-walking"); as 2^b < 2n, a walk takes fewer than two steps on
// average, and it stays a bijection of [0, n).
//
// Why by hand: no library we link offers a keyed permutation of an arbitrary
// range; grain's index shuffle (the same construction) is Python/C++ inside
// grain and not a reusable library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace a2pack::dataset {

class IndexShuffle {
 public:
  static constexpr int kRounds = 4;

  IndexShuffle() = default;
  // A permutation of [0, n), n <= 2^32, for this (seed, epoch).
  IndexShuffle(uint64_t n, uint64_t seed, uint64_t epoch);

  uint64_t size() const { return n_; }
  // Position i of the order (i < n).
  uint32_t at(uint32_t i) const;
  // Positions [start, start + len) of the order, to out (start + len <= n):
  // a batch at a time, so the rounds run over arrays the compiler vectorises.
  void fill(uint64_t start, size_t len, uint32_t* out) const;

 private:
  uint64_t n_ = 0;
  uint32_t lo_bits_ = 0, lo_mask_ = 0, hi_mask_ = 0;
  uint32_t keys_[kRounds] = {};
};

}  // namespace a2pack::dataset
