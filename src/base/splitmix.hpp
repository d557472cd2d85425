// SplitMix64 with an unbiased bounded draw: the small, bit-reproducible
// generator behind every seeded shuffle (packfile epochs, dataset samplers).
// Hand-written because std::uniform_int_distribution differs between
// standard libraries, and a seed must give the same order everywhere.
#pragma once

#include <cstdint>

namespace a2pack {

struct SplitMix64 {
  uint64_t state;

  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound), bound > 0, without modulo bias (Lemire's method).
  uint64_t below(uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
};

}  // namespace a2pack
