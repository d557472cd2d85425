#include "logger/encoder.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.hpp"
#include "base/varint.hpp"

namespace a2pack::logger {

namespace {

bool good_scale(double s) { return std::isnormal(s) && s > 0; }

[[noreturn]] void bad_value(uint32_t sid, size_t i, double v, double scale) {
  if (std::isnan(v)) fail(A2PACK_E_INVALID_ARGUMENT, "stream {}: values[{}] is NaN", sid, i);
  if (std::isinf(v))
    fail(A2PACK_E_INVALID_ARGUMENT, "stream {}: values[{}] is {}", sid, i, v > 0 ? "+inf" : "-inf");
  fail(A2PACK_E_OUT_OF_RANGE,
       "stream {}: values[{}] = {} does not fit in int64 after quantisation by value_scale {}",
       sid, i, v, scale);
}

[[noreturn]] void bad_order(uint32_t sid, size_t i, uint32_t prev, uint32_t cur, bool sorted) {
  if (sorted)
    fail(A2PACK_E_INVALID_ARGUMENT, "stream {}: index {} appears more than once", sid, cur);
  fail(A2PACK_E_INVALID_ARGUMENT,
       "stream {}: indices[{}] = {} is not greater than indices[{}] = {} (indices must be "
       "strictly increasing; register the stream with the sort flag to have them sorted)",
       sid, i, cur, i - 1, prev);
}

// Branch-free varint store: the byte count comes from the bit length and the
// 7-bit groups are spread into bytes with three shift-and-mask steps, then 8
// bytes are stored at once (callers reserve kEncodeSlack spare bytes). Varint
// lengths vary from value to value, so the usual byte loop mispredicts its
// exit branch about once per value; this costs a dozen ALU ops instead.
// Values of 2^56 and more (rare) take the loop.
inline uint8_t* put(uint8_t* p, uint64_t v) {
  if (v >= (uint64_t{1} << 56)) [[unlikely]]
    return varint::write(p, v);
  unsigned bits = 64u - static_cast<unsigned>(__builtin_clzll(v | 1));
  unsigned len = (bits * 9 + 64) / 64;  // ceil(bits / 7) for bits in 1..64
  uint64_t x = v;
  x = (x & 0x000000000FFFFFFFull) | ((x & 0x00FFFFFFF0000000ull) << 4);
  x = (x & 0x00003FFF00003FFFull) | ((x & 0x0FFFC0000FFFC000ull) << 2);
  x = (x & 0x007F007F007F007Full) | ((x & 0x3F803F803F803F80ull) << 1);
  x |= 0x8080808080808080ull & ((uint64_t{1} << (8 * (len - 1))) - 1);
  std::memcpy(p, &x, 8);
  return p + len;
}

// Indices then values. Returns nullptr (having written garbage) when the
// indices are not strictly increasing or a value does not quantise; the
// caller then finds and reports the exact problem (or sorts).
inline uint8_t* encode_body(uint8_t* p, double value_scale, const uint32_t* idx,
                            const double* val, size_t n) {
  p = put(p, n);
  if (n == 0) return p;
  p = put(p, idx[0]);
  uint32_t bad = 0;
  for (size_t i = 1; i < n; ++i) {
    bad |= idx[i] <= idx[i - 1];
    p = put(p, static_cast<uint32_t>(idx[i] - idx[i - 1] - 1));
  }
  if (bad) [[unlikely]]
    return nullptr;
  // Values in blocks: quantise (a loop the compiler can keep branch-free),
  // then store the varints.
  constexpr size_t kBlock = 64;
  uint64_t zz[kBlock];
  for (size_t b = 0; b < n; b += kBlock) {
    size_t m = n - b < kBlock ? n - b : kBlock;
    bool ok = true;
    for (size_t k = 0; k < m; ++k) {
      double r = val[b + k] / value_scale;
      bool in = r >= -9223372036854775808.0 && r < 9223372036854775808.0;  // false for NaN
      ok &= in;
      double t = (r + 6755399441055744.0) - 6755399441055744.0;  // round half even below 2^52
      double rr = std::fabs(r) < 4503599627370496.0 ? t : r;
      int64_t q = static_cast<int64_t>(in ? rr : 0.0);
      zz[k] = varint::zigzag_encode(q);
    }
    if (!ok) [[unlikely]]
      return nullptr;
    for (size_t k = 0; k < m; ++k) p = put(p, zz[k]);
  }
  return p;
}

// The exact problem of a record encode_body refused (indices checked first).
[[noreturn]] void explain(uint32_t sid, double value_scale, const uint32_t* idx,
                          const double* val, size_t n, bool sorted) {
  for (size_t i = 1; i < n; ++i)
    if (idx[i] <= idx[i - 1]) bad_order(sid, i, idx[i - 1], idx[i], sorted);
  for (size_t i = 0; i < n; ++i) {
    int64_t q;
    if (!quantise(val[i], value_scale, q)) bad_value(sid, i, val[i], value_scale);
  }
  fail(A2PACK_E_INTERNAL, "stream {}: record refused for no reason found", sid);
}

}  // namespace

void check_scales(double epoch_scale, double value_scale) {
  if (!good_scale(epoch_scale))
    fail(A2PACK_E_INVALID_ARGUMENT, "epoch_scale must be a positive normal number, got {}",
         epoch_scale);
  if (!good_scale(value_scale))
    fail(A2PACK_E_INVALID_ARGUMENT, "value_scale must be a positive normal number, got {}",
         value_scale);
}

uint8_t* encode_record(uint8_t* p, uint32_t sid, const StreamInfo& s, double epoch,
                       int64_t base_tick, const uint32_t* indices, const double* values,
                       size_t n, int64_t* tick, SortScratch* scratch) {
  if (n > kMaxRecordValues)
    fail(A2PACK_E_INVALID_ARGUMENT, "stream {}: a record holds at most {} non-zeros, got {}",
         sid, kMaxRecordValues, n);
  int64_t t;
  if (!quantise(epoch, s.epoch_scale, t)) [[unlikely]] {
    if (!std::isfinite(epoch))
      fail(A2PACK_E_INVALID_ARGUMENT, "stream {}: epoch {} is not finite", sid, epoch);
    fail(A2PACK_E_OUT_OF_RANGE,
         "stream {}: epoch {} does not fit in int64 ticks of epoch_scale {}", sid, epoch,
         s.epoch_scale);
  }
  p = put(p, sid);
  // Wrapping difference: the decoder adds it back with the same wrap, so even
  // ticks at opposite ends of int64 round-trip exactly.
  uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(base_tick);
  p = put(p, varint::zigzag_encode(static_cast<int64_t>(delta)));
  uint8_t* end = encode_body(p, s.value_scale, indices, values, n);
  if (!end) [[unlikely]] {
    bool unordered = false;
    for (size_t i = 1; i < n && !unordered; ++i) unordered = indices[i] <= indices[i - 1];
    if (!unordered || !(s.flags & kStreamSort) || !scratch)
      explain(sid, s.value_scale, indices, values, n, false);
    // Sort the pairs, then encode from the sorted copy; duplicates and bad
    // values are refused there, naming the caller's positions.
    auto& perm = scratch->perm;
    auto& si = scratch->indices;
    auto& sv = scratch->values;
    perm.resize(n);
    for (size_t i = 0; i < n; ++i) perm[i] = static_cast<uint32_t>(i);
    std::stable_sort(perm.begin(), perm.end(),
                     [&](uint32_t a, uint32_t b) { return indices[a] < indices[b]; });
    si.resize(n);
    sv.resize(n);
    for (size_t i = 0; i < n; ++i) {
      si[i] = indices[perm[i]];
      sv[i] = values[perm[i]];
    }
    for (size_t i = 1; i < n; ++i)
      if (si[i] == si[i - 1]) bad_order(sid, i, si[i - 1], si[i], true);
    for (size_t i = 0; i < n; ++i) {
      int64_t q;
      if (!quantise(values[i], s.value_scale, q)) bad_value(sid, i, values[i], s.value_scale);
    }
    end = encode_body(p, s.value_scale, si.data(), sv.data(), n);
    if (!end) explain(sid, s.value_scale, si.data(), sv.data(), n, true);
  }
  *tick = t;
  return end;
}

}  // namespace a2pack::logger
