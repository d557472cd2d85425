// Postcard / LEB128 varints and ZigZag, written by hand: no distribution
// library implements postcard's exact rules (u32 at most 5 bytes, u64 at most
// 10, overflow of the type is an error), and these loops sit on the hottest
// decode paths, where an inlined, bounds-aware version matters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace a2pack::varint {

// Outcome of a checked read.
enum class Result { ok, truncated, overlong };

// Read an unsigned LEB128 value of at most `max_bits` bits (32 or 64) from
// [p, end). On success advances p. `overlong` covers both "too many bytes" and
// "value overflows the type".
template <unsigned MaxBits>
inline Result read(const uint8_t*& p, const uint8_t* end, uint64_t& out) {
  static_assert(MaxBits == 32 || MaxBits == 64 || MaxBits == 16);
  constexpr unsigned kMaxBytes = (MaxBits + 6) / 7;
  const uint8_t* q = p;
  uint64_t v = 0;
  for (unsigned i = 0; i < kMaxBytes; ++i) {
    if (q == end) return Result::truncated;
    uint8_t b = *q++;
    uint64_t part = b & 0x7F;
    unsigned shift = 7 * i;
    if (i == kMaxBytes - 1) {
      // Last permitted byte: no continuation, and no bits beyond the type.
      unsigned used = MaxBits - shift;
      if ((b & 0x80) || (used < 7 && (part >> used) != 0)) return Result::overlong;
    }
    v |= part << shift;
    if (!(b & 0x80)) {
      out = v;
      p = q;
      return Result::ok;
    }
  }
  return Result::overlong;
}

// Number of bytes `v` takes.
inline size_t size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) { v >>= 7; ++n; }
  return n;
}

// Write `v` at p (room for 10 bytes required); returns the new end.
inline uint8_t* write(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

inline void append(std::string& s, uint64_t v) {
  uint8_t buf[10];
  uint8_t* e = write(buf, v);
  s.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(e - buf));
}

inline uint64_t zigzag_encode(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t zigzag_decode(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

}  // namespace a2pack::varint
