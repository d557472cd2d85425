// The random stream of the upstream `ai-2048` tool, so a seed handed to
// a2pack's `ai_2048` module gives the very boards and shuffle orders it gives
// upstream's: Rust `rand` 0.8's StdRng (ChaCha with 12 rounds, from
// rand_chacha 0.3), seeded by `SeedableRng::seed_from_u64` (a PCG32 stream
// fills the 32-byte key), and the integer sampling `gen_range` and
// `SliceRandom::shuffle` do on top of it. Everything here follows those
// crates' documented algorithms; nothing depends on the C++ library's own
// distributions, which differ between standard libraries.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace a2pack::engine {

class StdRng {
 public:
  explicit StdRng(uint64_t seed) {
    // rand_core 0.6 seed_from_u64: eight PCG32 (XSH RR) outputs, little endian.
    for (auto& k : key_) {
      seed = seed * 6364136223846793005ull + 11634580027462260723ull;
      const auto xorshifted = static_cast<uint32_t>(((seed >> 18) ^ seed) >> 27);
      k = std::rotr(xorshifted, static_cast<int>(seed >> 59));
    }
  }

  uint32_t next_u32() {
    if (index_ >= kWords) refill();
    return buf_[index_++];
  }

  // rand_core's BlockRng::next_u64: two consecutive words, low first, the
  // pair straddling a refill when only one word is left.
  uint64_t next_u64() {
    if (index_ + 1 < kWords) {
      const uint64_t lo = buf_[index_], hi = buf_[index_ + 1];
      index_ += 2;
      return (hi << 32) | lo;
    }
    if (index_ >= kWords) {
      refill();
      index_ = 2;
      return (uint64_t{buf_[1]} << 32) | buf_[0];
    }
    const uint64_t lo = buf_[kWords - 1];
    refill();
    index_ = 1;
    return (uint64_t{buf_[0]} << 32) | lo;
  }

  // gen_range(0..n) for u32 (and i32) with n >= 1: rand 0.8's
  // sample_single_inclusive, a widening multiply with rejection.
  uint32_t below_u32(uint32_t n) {
    const uint32_t zone = (n << std::countl_zero(n)) - 1;
    for (;;) {
      const uint64_t m = uint64_t{next_u32()} * n;
      if (static_cast<uint32_t>(m) <= zone) return static_cast<uint32_t>(m >> 32);
    }
  }

  // The same for u64 (and usize) ranges.
  uint64_t below_u64(uint64_t n) {
    const uint64_t zone = (n << std::countl_zero(n)) - 1;
    for (;;) {
      const auto m = static_cast<unsigned __int128>(next_u64()) * n;
      if (static_cast<uint64_t>(m) <= zone) return static_cast<uint64_t>(m >> 64);
    }
  }

  // SliceRandom::shuffle (Durstenfeld from the back; indices drawn as u32
  // while the bound fits, as rand's gen_index does).
  template <typename T>
  void shuffle(T* items, size_t n) {
    for (size_t i = n; i-- > 1;) {
      const size_t bound = i + 1;
      const size_t j = bound <= UINT32_MAX ? below_u32(static_cast<uint32_t>(bound))
                                           : static_cast<size_t>(below_u64(bound));
      T tmp = items[i];
      items[i] = items[j];
      items[j] = tmp;
    }
  }

 private:
  static constexpr unsigned kWords = 64;  // rand_chacha fills four blocks at a time

  static void quarter(uint32_t* x, int a, int b, int c, int d) {
    x[a] += x[b]; x[d] = std::rotl(x[d] ^ x[a], 16);
    x[c] += x[d]; x[b] = std::rotl(x[b] ^ x[c], 12);
    x[a] += x[b]; x[d] = std::rotl(x[d] ^ x[a], 8);
    x[c] += x[d]; x[b] = std::rotl(x[b] ^ x[c], 7);
  }

  // Four ChaCha12 blocks for counters block_ .. block_+3, stream (nonce) 0.
  void refill() {
    for (unsigned blk = 0; blk < 4; ++blk, ++block_) {
      uint32_t in[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};
      for (int i = 0; i < 8; ++i) in[4 + i] = key_[i];
      in[12] = static_cast<uint32_t>(block_);
      in[13] = static_cast<uint32_t>(block_ >> 32);
      uint32_t x[16];
      for (int i = 0; i < 16; ++i) x[i] = in[i];
      for (int r = 0; r < 6; ++r) {  // 6 double rounds = 12 rounds
        quarter(x, 0, 4, 8, 12); quarter(x, 1, 5, 9, 13);
        quarter(x, 2, 6, 10, 14); quarter(x, 3, 7, 11, 15);
        quarter(x, 0, 5, 10, 15); quarter(x, 1, 6, 11, 12);
        quarter(x, 2, 7, 8, 13); quarter(x, 3, 4, 9, 14);
      }
      for (int i = 0; i < 16; ++i) buf_[16 * blk + i] = x[i] + in[i];
    }
    index_ = 0;
  }

  uint32_t key_[8];
  uint64_t block_ = 0;
  uint32_t buf_[kWords] = {};
  unsigned index_ = kWords;  // empty: the first draw refills
};

}  // namespace a2pack::engine
