// Hand-written generators so a seed gives the same game on every platform and
// standard library (std::*_distribution outputs are implementation-defined).
#pragma once

#include <cstdint>

namespace a2pack::engine {

// SplitMix64 finaliser: a strong 64-bit mix, used to derive seeds.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// SplitMix64 stream; only used to fill the xoshiro state from one seed.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() { return mix64(state += 0x9E3779B97F4A7C15ull); }
};

// xoshiro256** 1.0 (Blackman & Vigna), the game's random source.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    SplitMix64 sm{seed};
    for (auto& w : s_) w = sm.next();  // never all zero: splitmix64 is a bijection of a counter
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n) for n >= 1 by multiply-shift: exact integer arithmetic,
  // bias below n / 2^64, which is nothing for n <= 16.
  uint32_t below(uint32_t n) {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace a2pack::engine
