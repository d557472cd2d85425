// 2048 board basics shared by every layer (docs/run-files.md).
#pragma once

#include <cstdint>

namespace a2pack::board {

inline unsigned cell(uint64_t b, unsigned i) { return static_cast<unsigned>((b >> (60 - 4 * i)) & 0xF); }

inline unsigned max_exponent(uint64_t b) {
  unsigned m = 0;
  for (unsigned i = 0; i < 16; ++i) {
    unsigned e = static_cast<unsigned>(b & 0xF);
    if (e > m) m = e;
    b >>= 4;
  }
  return m;
}

inline uint32_t highest_tile(uint64_t b) {
  unsigned e = max_exponent(b);
  return e ? (1u << e) : 0u;
}

inline uint64_t score(uint64_t b) {
  uint64_t s = 0;
  for (unsigned i = 0; i < 16; ++i) {
    unsigned e = static_cast<unsigned>(b & 0xF);
    if (e >= 2) s += static_cast<uint64_t>(e - 1) << e;
    b >>= 4;
  }
  return s;
}

// Names used by JSON exports ("UP", "DOWN", "LEFT", "RIGHT").
inline const char* move_name(unsigned m) {
  static const char* const kNames[4] = {"UP", "DOWN", "LEFT", "RIGHT"};
  return m < 4 ? kNames[m] : "?";
}

}  // namespace a2pack::board
