// Encoding one record into a frame's raw bytes (the work record() does on the
// caller's thread): validation, quantisation, gap and ZigZag varints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
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

// Format version 2's per-frame predictor state (one per recording thread,
// and one per decoding thread for the bulk parser): each stream's epoch delta
// base and its previous record in the frame, whose quantised values predict
// the next record's (docs/logger.md). A new frame resets it in O(1).
//
// Each stream owns two slots in one arena: the previous record's and the one
// the current record is written into; commit() swaps their roles. So the
// arena holds two records per stream, not the whole frame: on the sim
// workload (64 streams of 16 non-zeros) 45 KiB that stay in L1/L2 instead
// of 2 MiB streamed through L3 per 256 KiB frame. A slot grows (a new one at
// the arena's end) when a record outgrows it; records above
// kMaxPredictorValues are not kept, which bounds a slot.
//
// Slot layout: a sentinel, the record's n entries, then kTail sentinels
// (written by commit). Indices are kept as int64 and the sentinels are -1,
// which never equals a (zero-extended) u32 index: the vector predictors read
// the neighbours k - 1 .. k + 8 of any position k <= n_prev with plain loads
// and no masks (a read past the record meets a sentinel and predicts 0):
// k + 4 for four lanes (AVX2), k + 8 for eight (the AVX-512 decoder).
class FrameState {
 public:
  static constexpr size_t kTail = 9;
  static constexpr int64_t kSentinel = -1;

  FrameState() = default;
  FrameState(const FrameState&) = delete;
  FrameState& operator=(const FrameState&) = delete;

  void new_frame() {
    ++gen_;
    used_ = 0;
  }

  // What encode_record_v2 needs of a stream's previous record in the frame.
  struct Prev {
    int64_t base_tick = 0;         // 0 before the stream's first record in the frame
    const int64_t* idx = nullptr;  // nullptr: no predictor; sentinels around it
    const int64_t* q = nullptr;
    size_t n = 0;
  };
  // One record of stream sid with n values: where to write its quantised
  // values (q) and its indices (idx) for the next record's predictor
  // (nullptr when it will not be one: n > kMaxPredictorValues), and the
  // stream's previous record. Reads of the previous record's neighbours
  // reach at most n + kTail - 1 slots past its start, inside its slot.
  // Then commit(). One lookup per record: on the hot path of both the
  // encoder and the bulk decoder.
  struct Record {
    int64_t* q = nullptr;
    int64_t* idx = nullptr;
    Prev prev;
  };
  Record begin(uint32_t sid, size_t n) {
    if (sid >= v_.size()) [[unlikely]]
      v_.resize(static_cast<size_t>(sid) + 1);
    Entry& e = v_[sid];
    Record r;
    if (n <= kMaxPredictorValues) {
      if (e.slot_gen != gen_) {  // slots of an earlier frame: the arena was reset
        e.slot_gen = gen_;
        e.cap[0] = e.cap[1] = 0;
      }
      const unsigned w = e.cur ^ 1u;
      // No slot yet (an empty record needs one too, for its sentinels), or
      // too small. May move the arena: before the pointers below.
      if (e.cap[w] == 0 || e.cap[w] < n) [[unlikely]]
        new_slot(e, w, n);
      r.q = q_.get() + e.off[w];
      r.idx = idx_.get() + e.off[w];
    }
    if (e.gen == gen_) {
      r.prev.base_tick = e.tick;
      if (e.n != kNone && e.n != 0) {
        const size_t at = e.off[e.cur];
        r.prev.idx = idx_.get() + at;
        r.prev.q = q_.get() + at;
        r.prev.n = e.n;
      }
    }
    return r;
  }
  // The record begun for sid was written: it becomes the stream's previous
  // record. Only after begin(sid, n) with the same sid and n.
  void commit(uint32_t sid, int64_t tick, size_t n) {
    Entry& e = v_[sid];
    e.tick = tick;
    e.gen = gen_;
    if (n > kMaxPredictorValues) {
      e.n = kNone;
      return;
    }
    e.cur ^= 1u;
    e.n = static_cast<uint32_t>(n);
    static constexpr int64_t kTailFill[kTail] = {kSentinel, kSentinel, kSentinel,
                                                 kSentinel, kSentinel, kSentinel,
                                                 kSentinel, kSentinel, kSentinel};
    std::memcpy(idx_.get() + e.off[e.cur] + n, kTailFill, sizeof kTailFill);
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Entry {
    int64_t tick = 0;
    uint64_t gen = 0;       // the frame of the last commit (its Prev valid)
    uint64_t slot_gen = 0;  // the frame the slots were placed in
    size_t off[2] = {0, 0};
    uint32_t cap[2] = {0, 0};
    uint32_t n = kNone;
    unsigned cur = 0;       // the slot holding the previous record
  };
  void new_slot(Entry& e, unsigned w, size_t n);
  std::vector<Entry> v_;
  uint64_t gen_ = 1;
  std::unique_ptr<int64_t[]> idx_;
  std::unique_ptr<int64_t[]> q_;
  size_t used_ = 0, cap_ = 0;
};

// Encode one record in format version 2: its structure at s (room for
// max_struct_bytes(n)) and its values at v (room for max_value_bytes(n)).
// Validation and errors as encode_record (nothing of a refused record
// counts: s, v and st are unchanged). On success advances s and v and
// records the record in st.
void encode_record_v2(uint8_t*& s, uint8_t*& v, uint32_t sid, const StreamInfo& info,
                      double epoch, FrameState& st, const uint32_t* indices, const double* values,
                      size_t n, SortScratch* scratch);

// Tests: encode version 2 with the portable build (true) or the best one
// this CPU runs (false, the default). Both write the same bytes. Not
// thread-safe: call before encoding starts.
void use_portable_encoder(bool portable);

// Encode one record in format version 1 at p, which must have room for
// max_record_bytes(n) (tests and the one-frame-per-record benchmark; the writer writes
// version 2).
// Validates everything first-come (epoch, then indices and values in one
// pass); on invalid input throws Error (INVALID_ARGUMENT or OUT_OF_RANGE) and
// the caller discards whatever was written at p. On success returns the new
// end and the record's tick in *tick; the caller then updates the delta state.
// `scratch` is used only for streams with kStreamSort (may be null otherwise).
uint8_t* encode_record(uint8_t* p, uint32_t sid, const StreamInfo& s, double epoch,
                       int64_t base_tick, const uint32_t* indices, const double* values,
                       size_t n, int64_t* tick, SortScratch* scratch);

}  // namespace a2pack::logger
