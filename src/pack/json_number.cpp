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

char* write_u64(char* p, uint64_t v) {
  char tmp[20];
  char* end = tmp + 20;
  char* q = end;
  while (v >= 100) {
    unsigned r = static_cast<unsigned>(v % 100);
    v /= 100;
    q -= 2;
    std::memcpy(q, kPairs + 2 * r, 2);
  }
  if (v >= 10) {
    q -= 2;
    std::memcpy(q, kPairs + 2 * v, 2);
  } else {
    *--q = static_cast<char>('0' + v);
  }
  size_t n = static_cast<size_t>(end - q);
  std::memcpy(p, q, n);
  return p + n;
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
