#include "logger/encoder.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// encode_body: two builds of the same code (encode_body.inc), a portable one
// and one for CPUs with BMI2 and AVX2 (pdep spreads the varint groups, the
// quantisation loop runs 4 wide), chosen once at start-up.
// GCC's -O2 vectorises only loops whose trip count needs no epilogue; these
// block loops need one, so allow the dynamic cost model for this code.
#pragma GCC push_options
#pragma GCC optimize("vect-cost-model=dynamic")
namespace generic {
#include "logger/encode_body.inc"
}  // namespace generic
#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("bmi,bmi2,lzcnt,avx,avx2")
#define A2PACK_LOGGER_PDEP 1
namespace fast {
#include "logger/encode_body.inc"
}  // namespace fast
#undef A2PACK_LOGGER_PDEP
#pragma GCC pop_options
#endif
#pragma GCC pop_options

using BodyFn = uint8_t* (*)(uint8_t*, uint32_t, uint64_t, double, const uint32_t*, const double*,
                           size_t);

BodyFn pick_body() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // pdep is microcoded (slow) on AMD before Zen 3.
  if (__builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("lzcnt") && !__builtin_cpu_is("znver1") &&
      !__builtin_cpu_is("znver2") && !__builtin_cpu_is("amdfam15h") &&
      !__builtin_cpu_is("amdfam17h"))
    return fast::encode_body;
#endif
  return generic::encode_body;
}
const BodyFn encode_body = pick_body();

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
  // Wrapping difference: the decoder adds it back with the same wrap, so even
  // ticks at opposite ends of int64 round-trip exactly.
  uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(base_tick);
  uint64_t zz_delta = varint::zigzag_encode(static_cast<int64_t>(delta));
  uint8_t* end = encode_body(p, sid, zz_delta, s.value_scale, indices, values, n);
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
    end = encode_body(p, sid, zz_delta, s.value_scale, si.data(), sv.data(), n);
    if (!end) explain(sid, s.value_scale, si.data(), sv.data(), n, true);
  }
  *tick = t;
  return end;
}

}  // namespace a2pack::logger
