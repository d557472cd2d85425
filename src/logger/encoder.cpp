#include "logger/encoder.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/error.hpp"
#include "logger/cpu_features.hpp"
#include "logger/kernels/kernels.hpp"
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

// encode_body: the kernels' builds (kernels/encode.cpp), a portable one and
// one for CPUs with BMI2 and AVX2, chosen once at start-up.
using BodyFn = uint8_t* (*)(uint8_t*, uint32_t, uint64_t, double, const uint32_t*, const double*,
                           size_t);
using BodyV2Fn = BodyEnds (*)(uint8_t*, uint8_t*, uint32_t, uint64_t, double, const uint32_t*,
                              const double*, size_t, const int64_t*, const int64_t*, size_t,
                              int64_t*, int64_t*);

#if defined(__x86_64__)
const BodyFn encode_body = cpu_runs_fast_builds() ? fast::encode_body : generic::encode_body;
BodyV2Fn encode_body_v2 = cpu_runs_fast_builds() ? fast::encode_body_v2 : generic::encode_body_v2;
#else
const BodyFn encode_body = generic::encode_body;
BodyV2Fn encode_body_v2 = generic::encode_body_v2;
#endif

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

namespace {

// The record's tick; throws naming the stream when the epoch is not finite or
// does not fit in int64 ticks.
int64_t epoch_tick(uint32_t sid, const StreamInfo& s, double epoch) {
  int64_t t;
  if (!quantise(epoch, s.epoch_scale, t)) [[unlikely]] {
    if (!std::isfinite(epoch))
      fail(A2PACK_E_INVALID_ARGUMENT, "stream {}: epoch {} is not finite", sid, epoch);
    fail(A2PACK_E_OUT_OF_RANGE,
         "stream {}: epoch {} does not fit in int64 ticks of epoch_scale {}", sid, epoch,
         s.epoch_scale);
  }
  return t;
}

void check_count(uint32_t sid, size_t n) {
  if (n > kMaxRecordValues)
    fail(A2PACK_E_INVALID_ARGUMENT, "stream {}: a record holds at most {} non-zeros, got {}",
         sid, kMaxRecordValues, n);
}

// A record the encoder refused: when it is valid but unsorted and its stream
// sorts, leave the sorted pairs in scratch (the caller encodes those);
// otherwise throw the exact problem, naming the caller's positions.
void sort_or_explain(uint32_t sid, const StreamInfo& s, const uint32_t* indices,
                     const double* values, size_t n, SortScratch* scratch) {
  bool unordered = false;
  for (size_t i = 1; i < n && !unordered; ++i) unordered = indices[i] <= indices[i - 1];
  if (!unordered || !(s.flags & kStreamSort) || !scratch)
    explain(sid, s.value_scale, indices, values, n, false);
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
}

}  // namespace

void use_portable_encoder(bool portable) {
#if defined(__x86_64__)
  encode_body_v2 = portable || !cpu_runs_fast_builds() ? generic::encode_body_v2 : fast::encode_body_v2;
#else
  (void)portable;
#endif
}

void FrameState::new_slot(Entry& e, unsigned w, size_t n) {
  // Room for the record's growth: at least 16, and double the old slot, so
  // a stream whose records keep growing moves O(log n) times.
  const size_t cap = std::max<size_t>({n, size_t{16}, size_t{e.cap[w]} * 2});
  const size_t need = used_ + 1 + cap + kTail;
  if (need > cap_) {
    // Double, so that a frame's worth of slots costs O(1) reallocations.
    const size_t grown = std::max<size_t>({cap_ * 2, need, 1024});
    std::unique_ptr<int64_t[]> idx(new int64_t[grown]);
    std::unique_ptr<int64_t[]> q(new int64_t[grown]);
    // Every slot starts as a sentinel (and q as 0): the predictor's reads
    // past the records never see uninitialised memory.
    std::fill(idx.get(), idx.get() + grown, kSentinel);
    std::fill(q.get(), q.get() + grown, int64_t{0});
    if (idx_) {
      std::memcpy(idx.get(), idx_.get(), used_ * sizeof(int64_t));
      std::memcpy(q.get(), q_.get(), used_ * sizeof(int64_t));
    }
    idx_ = std::move(idx);
    q_ = std::move(q);
    cap_ = grown;
  }
  idx_[used_] = kSentinel;  // before the record (the arena is reused across frames)
  e.off[w] = used_ + 1;
  e.cap[w] = static_cast<uint32_t>(cap);
  used_ = need;
}

void encode_record_v2(uint8_t*& s_out, uint8_t*& v_out, uint32_t sid, const StreamInfo& s,
                      double epoch, FrameState& st, const uint32_t* indices, const double* values,
                      size_t n, SortScratch* scratch) {
  check_count(sid, n);
  int64_t t = epoch_tick(sid, s, epoch);
  const FrameState::Record rec = st.begin(sid, n);
  int64_t* qout = rec.q;
  int64_t* iout = rec.idx;
  const FrameState::Prev& pr = rec.prev;
  // Wrapping difference: the decoder adds it back with the same wrap, so even
  // ticks at opposite ends of int64 round-trip exactly.
  uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(pr.base_tick);
  uint64_t zz_delta = varint::zigzag_encode(static_cast<int64_t>(delta));
  BodyEnds e = encode_body_v2(s_out, v_out, sid, zz_delta, s.value_scale, indices, values, n,
                              pr.idx, pr.q, pr.n, qout, iout);
  if (!e.s) [[unlikely]] {
    sort_or_explain(sid, s, indices, values, n, scratch);
    e = encode_body_v2(s_out, v_out, sid, zz_delta, s.value_scale, scratch->indices.data(),
                       scratch->values.data(), n, pr.idx, pr.q, pr.n, qout, iout);
    if (!e.s) explain(sid, s.value_scale, scratch->indices.data(), scratch->values.data(), n, true);
  }
  st.commit(sid, t, n);
  s_out = e.s;
  v_out = e.v;
}

uint8_t* encode_record(uint8_t* p, uint32_t sid, const StreamInfo& s, double epoch,
                       int64_t base_tick, const uint32_t* indices, const double* values,
                       size_t n, int64_t* tick, SortScratch* scratch) {
  check_count(sid, n);
  int64_t t = epoch_tick(sid, s, epoch);
  uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(base_tick);
  uint64_t zz_delta = varint::zigzag_encode(static_cast<int64_t>(delta));
  uint8_t* end = encode_body(p, sid, zz_delta, s.value_scale, indices, values, n);
  if (!end) [[unlikely]] {
    sort_or_explain(sid, s, indices, values, n, scratch);
    end = encode_body(p, sid, zz_delta, s.value_scale, scratch->indices.data(),
                      scratch->values.data(), n);
    if (!end) explain(sid, s.value_scale, scratch->indices.data(), scratch->values.data(), n, true);
  }
  *tick = t;
  return end;
}

}  // namespace a2pack::logger
