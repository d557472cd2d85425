#include "base/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <nmmintrin.h>
#define A2PACK_X86 1
#endif

namespace a2pack::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

// GF(2) 32x32 matrices as column arrays (mat[i] = image of bit i): shifting a
// CRC register over zero bytes is a linear map, which is how independently
// computed CRCs are combined (zlib's crc32_combine method).
uint32_t gf2_times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (int i = 0; vec; ++i, vec >>= 1)
    if (vec & 1) sum ^= mat[i];
  return sum;
}
void gf2_square(uint32_t* sq, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) sq[n] = gf2_times(mat, mat[n]);
}

struct Tables {
  uint32_t t[8][256];
  constexpr Tables() : t{} {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};
constexpr Tables kTables{};

}  // namespace

uint32_t extend_table(uint32_t crc, const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (len >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= c;
    c = kTables.t[7][v & 0xFF] ^ kTables.t[6][(v >> 8) & 0xFF] ^ kTables.t[5][(v >> 16) & 0xFF] ^
        kTables.t[4][(v >> 24) & 0xFF] ^ kTables.t[3][(v >> 32) & 0xFF] ^
        kTables.t[2][(v >> 40) & 0xFF] ^ kTables.t[1][(v >> 48) & 0xFF] ^
        kTables.t[0][(v >> 56) & 0xFF];
    p += 8;
    len -= 8;
  }
  while (len--) c = (c >> 8) ^ kTables.t[0][(c ^ *p++) & 0xFF];
  return ~c;
}

#ifdef A2PACK_X86
namespace {

// Operator that advances a (non-inverted) CRC register over `len` zero bytes.
std::array<uint32_t, 32> zeros_operator(size_t len) {
  uint32_t odd[32], even[32];
  odd[0] = kPoly;
  uint32_t row = 1;
  for (int n = 1; n < 32; ++n) { odd[n] = row; row <<= 1; }
  gf2_square(even, odd);  // 2 zero bits
  gf2_square(odd, even);  // 4 zero bits
  // odd now advances by 4 bits = half a byte; square to 1 byte.
  std::array<uint32_t, 32> result{};
  for (int n = 0; n < 32; ++n) result[n] = 1u << n;  // identity
  uint32_t cur[32];
  gf2_square(cur, odd);  // 8 bits = 1 byte
  size_t l = len;
  while (l) {
    if (l & 1) {
      std::array<uint32_t, 32> tmp;
      for (int n = 0; n < 32; ++n) tmp[n] = gf2_times(cur, result[n]);
      result = tmp;
    }
    l >>= 1;
    if (l) {
      uint32_t sq[32];
      gf2_square(sq, cur);
      std::memcpy(cur, sq, sizeof cur);
    }
  }
  return result;
}

constexpr size_t kBlock = 4096;  // bytes per stream per round of the 3-way loop
struct ShiftTables {
  // Byte-wise lookup of the zeros operator for fast application.
  uint32_t t[4][256];
  explicit ShiftTables(size_t len) {
    auto op = zeros_operator(len);
    for (int b = 0; b < 4; ++b)
      for (uint32_t v = 0; v < 256; ++v) t[b][v] = gf2_times(op.data(), v << (8 * b));
  }
  uint32_t apply(uint32_t crc) const {
    return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^
           t[3][crc >> 24];
  }
};

__attribute__((target("sse4.2,crc32"))) uint32_t hw_serial(uint32_t c, const uint8_t* p, size_t len) {
  uint64_t c64 = c;
  while (len >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    len -= 8;
  }
  c = static_cast<uint32_t>(c64);
  while (len--) c = _mm_crc32_u8(c, *p++);
  return c;
}

}  // namespace

// ("crc32" as well as "sse4.2": recent clang - 22, in zig 0.17 - asks for the crc32
// feature by name before it inlines _mm_crc32_*.)
__attribute__((target("sse4.2,crc32"))) uint32_t extend_hardware(uint32_t crc, const void* data,
                                                                 size_t len) {
  static const ShiftTables shift(kBlock);
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  // The crc32 instruction has 3-cycle latency and 1-cycle throughput: three
  // independent streams over adjacent blocks keep the unit busy, then the
  // partial CRCs are combined by shifting over the following blocks' length.
  while (len >= 3 * kBlock) {
    uint64_t c0 = c, c1 = 0, c2 = 0;
    const uint8_t* p1 = p + kBlock;
    const uint8_t* p2 = p + 2 * kBlock;
    for (size_t i = 0; i < kBlock; i += 8) {
      uint64_t v0, v1, v2;
      std::memcpy(&v0, p + i, 8);
      std::memcpy(&v1, p1 + i, 8);
      std::memcpy(&v2, p2 + i, 8);
      c0 = _mm_crc32_u64(c0, v0);
      c1 = _mm_crc32_u64(c1, v1);
      c2 = _mm_crc32_u64(c2, v2);
    }
    c = shift.apply(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
    c = shift.apply(c) ^ static_cast<uint32_t>(c2);
    p += 3 * kBlock;
    len -= 3 * kBlock;
  }
  return ~hw_serial(c, p, len);
}

bool hardware_available() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c & bit_SSE4_2) != 0;
}
#else
uint32_t extend_hardware(uint32_t crc, const void* data, size_t len) {
  return extend_table(crc, data, len);
}
bool hardware_available() { return false; }
#endif

uint32_t combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
  if (len2 == 0) return crc1;
  uint32_t even[32], odd[32];
  odd[0] = kPoly;  // the operator for one zero bit
  uint32_t row = 1;
  for (int n = 1; n < 32; ++n) {
    odd[n] = row;
    row <<= 1;
  }
  gf2_square(even, odd);  // two zero bits
  gf2_square(odd, even);  // four zero bits
  // Apply len2 zero bytes to crc1, squaring the operator for each bit of len2.
  do {
    gf2_square(even, odd);
    if (len2 & 1) crc1 = gf2_times(even, crc1);
    len2 >>= 1;
    if (len2 == 0) break;
    gf2_square(odd, even);
    if (len2 & 1) crc1 = gf2_times(odd, crc1);
    len2 >>= 1;
  } while (len2 != 0);
  return crc1 ^ crc2;
}

uint32_t extend(uint32_t crc, const void* data, size_t len) {
  static const bool hw = hardware_available();
  return hw ? extend_hardware(crc, data, len) : extend_table(crc, data, len);
}

}  // namespace a2pack::crc32c
