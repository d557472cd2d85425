// Encoding one record into a frame's raw bytes (the work record() does on the
// caller's thread): validation, quantisation, gap and ZigZag varints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "logger/format.hpp"

namespace a2pack::logger {

// Stream flag: sort a record's (index, value) pairs when the indices are not
// strictly increasing (public value A2PACK_LOGGER_SORT).
inline constexpr uint32_t kStreamSort = 1;

struct StreamInfo {
  double epoch_scale = 0;
  double value_scale = 0;
  uint32_t flags = 0;
};

// Check a (epoch_scale, value_scale) pair; throws INVALID_ARGUMENT naming the
// bad one (zero, negative, NaN, infinite or subnormal).
void check_scales(double epoch_scale, double value_scale);

// The per-stream epoch delta base within the current frame. Generation stamps
// make "start a new frame" O(1) however many streams exist.
class DeltaState {
 public:
  void new_frame() { ++gen_; }
  int64_t base(uint32_t sid) const {
    return sid < v_.size() && v_[sid].gen == gen_ ? v_[sid].tick : 0;
  }
  void set(uint32_t sid, int64_t tick) {
    if (sid >= v_.size()) v_.resize(static_cast<size_t>(sid) + 1);
    v_[sid] = {tick, gen_};
  }

 private:
  struct Entry {
    int64_t tick = 0;
    uint64_t gen = 0;
  };
  std::vector<Entry> v_;
  uint64_t gen_ = 1;
};

// Scratch for sorting a record of a stream registered with kStreamSort.
struct SortScratch {
  std::vector<uint32_t> perm;
  std::vector<uint32_t> indices;
  std::vector<double> values;
};

// Encode one record at p, which must have room for max_record_bytes(n).
// Validates everything first-come (epoch, then indices and values in one
// pass); on invalid input throws Error (INVALID_ARGUMENT or OUT_OF_RANGE) and
// the caller discards whatever was written at p. On success returns the new
// end and the record's tick in *tick; the caller then updates the delta state.
// `scratch` is used only for streams with kStreamSort (may be null otherwise).
uint8_t* encode_record(uint8_t* p, uint32_t sid, const StreamInfo& s, double epoch,
                       int64_t base_tick, const uint32_t* indices, const double* values,
                       size_t n, int64_t* tick, SortScratch* scratch);

}  // namespace a2pack::logger
