#include "pack/json_number.hpp"

#include <charconv>
#include <cmath>
#include <cstring>

namespace a2pack::pack::json {
namespace {

constexpr char kPairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

char* write_exponent(char* p, int e) {
  if (e < 0) {
    *p++ = '-';
    e = -e;
  }
  return write_u64(p, static_cast<uint64_t>(e));
}

}  // namespace

// Decimal digits of v (1..20).
inline unsigned digits10(uint64_t v) {
  static constexpr uint64_t kPow10[20] = {1ull,
                                          10ull,
                                          100ull,
                                          1000ull,
                                          10000ull,
                                          100000ull,
                                          1000000ull,
                                          10000000ull,
                                          100000000ull,
                                          1000000000ull,
                                          10000000000ull,
                                          100000000000ull,
                                          1000000000000ull,
                                          10000000000000ull,
                                          100000000000000ull,
                                          1000000000000000ull,
                                          10000000000000000ull,
                                          100000000000000000ull,
                                          1000000000000000000ull,
                                          10000000000000000000ull};
  const unsigned bits = 64 - static_cast<unsigned>(__builtin_clzll(v | 1));
  const unsigned t = (bits * 1233) >> 12;  // floor(log10(2^bits)), off by at most one
  return v == 0 ? 1 : t + (v >= kPow10[t] ? 1 : 0);
}

// Write exactly 8 digits of v < 10^8 ending at `end`, in 32-bit arithmetic.
inline void write8(char* end, uint32_t v) {
  for (int k = 0; k < 4; ++k) {
    uint32_t r = v % 100;
    v /= 100;
    end -= 2;
    std::memcpy(end, kPairs + 2 * r, 2);
  }
}

char* write_u64(char* p, uint64_t v) {
  const unsigned n = digits10(v);
  char* const end = p + n;
  char* q = end;
  // Whole 8-digit groups from the right in 32-bit arithmetic (u64 division
  // by a constant only twice), then the leading < 10^8 part.
  while (v >= 100000000) {
    write8(q, static_cast<uint32_t>(v % 100000000));
    v /= 100000000;
    q -= 8;
  }
  uint32_t w = static_cast<uint32_t>(v);
  while (w >= 100) {
    uint32_t r = w % 100;
    w /= 100;
    q -= 2;
    std::memcpy(q, kPairs + 2 * r, 2);
  }
  if (w >= 10) {
    q -= 2;
    std::memcpy(q, kPairs + 2 * w, 2);
  } else {
    *--q = static_cast<char>('0' + w);
  }
  return end;
}

char* write_f32(char* p, float f) {
  if (!std::isfinite(f)) {
    std::memcpy(p, "null", 4);
    return p + 4;
  }
  if (std::signbit(f)) {
    *p++ = '-';
    f = -f;
  }
  if (f == 0.0f) {
    std::memcpy(p, "0.0", 3);
    return p + 3;
  }
  // libstdc++'s shortest to_chars is Ryu, the algorithm behind the `ryu`
  // crate, so the digits agree; only the layout is redone here.
  char sci[32];
  auto res = std::to_chars(sci, sci + sizeof sci, f, std::chars_format::scientific);
  char digits[12];
  int length = 0;
  const char* q = sci;
  for (; q < res.ptr && *q != 'e'; ++q)
    if (*q != '.') digits[length++] = *q;
  int exp10 = 0;
  std::from_chars(q + 1 + (q[1] == '+'), res.ptr, exp10);
  const int kk = exp10 + 1;  // 10^(kk-1) <= f < 10^kk
  const int k = kk - length;
  if (k >= 0 && kk <= 13) {  // 1234e7 -> 12340000000.0
    std::memcpy(p, digits, length);
    p += length;
    for (int i = length; i < kk; ++i) *p++ = '0';
    *p++ = '.';
    *p++ = '0';
  } else if (kk > 0 && kk <= 13) {  // 1234e-2 -> 12.34
    std::memcpy(p, digits, kk);
    p += kk;
    *p++ = '.';
    std::memcpy(p, digits + kk, length - kk);
    p += length - kk;
  } else if (kk > -6 && kk <= 0) {  // 1234e-6 -> 0.001234
    *p++ = '0';
    *p++ = '.';
    for (int i = kk; i < 0; ++i) *p++ = '0';
    std::memcpy(p, digits, length);
    p += length;
  } else if (length == 1) {  // 1e30
    *p++ = digits[0];
    *p++ = 'e';
    p = write_exponent(p, kk - 1);
  } else {  // 1234e30 -> 1.234e33
    *p++ = digits[0];
    *p++ = '.';
    std::memcpy(p, digits + 1, length - 1);
    p += length - 1;
    *p++ = 'e';
    p = write_exponent(p, kk - 1);
  }
  return p;
}

}  // namespace a2pack::pack::json
