// The game's random tile: a uniformly chosen empty cell gets a 2 (p = 0.9) or
// a 4 (p = 0.1).
#pragma once

#include <cstdint>

#include "engine/moves.hpp"
#include "engine/rng.hpp"

namespace a2pack::engine {

// Board with one tile spawned; b itself when it is full. Draws the cell first,
// then the value, so a seed's games never depend on anything else.
inline uint64_t spawn_tile(uint64_t b, Rng& rng) {
  unsigned empty = count_empty(b);
  if (empty == 0) return b;
  unsigned k = rng.below(empty);
  uint64_t exponent = rng.below(10) == 0 ? 2 : 1;
  for (unsigned i = 0; i < 16; ++i) {
    unsigned shift = 60 - 4 * i;
    if ((b >> shift) & 0xF) continue;
    if (k-- == 0) return b | (exponent << shift);
  }
  return b;  // unreachable: k < empty
}

}  // namespace a2pack::engine
