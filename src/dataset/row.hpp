// One step of a dataset: the 32-byte packed row of steps.npy (docs/dataset.md)
// and the rule that turns a decoded run step into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace a2pack::dataset {

// Byte layout, little-endian, no padding; numpy's dtype
// [('board','<u8'),('move','u1'),('ev_legal','u1'),('ev_values','<f4',(4,)),
//  ('run_id','<u4'),('step_index','<u2')] has exactly these offsets.
struct __attribute__((packed)) Row {
  uint64_t board;
  uint8_t move;
  uint8_t ev_legal;
  float ev_values[4];
  uint32_t run_id;
  uint16_t step_index;
};
static_assert(sizeof(Row) == 32, "a step row is 32 bytes");

inline constexpr size_t kRowBytes = 32;
inline constexpr size_t kOffBoard = 0, kOffMove = 8, kOffLegal = 9, kOffValues = 10,
                        kOffRunId = 26, kOffStepIndex = 30;
static_assert(offsetof(Row, ev_values) == kOffValues && offsetof(Row, run_id) == kOffRunId &&
              offsetof(Row, step_index) == kOffStepIndex);

// The largest run a row can index: step_index is a u16.
inline constexpr uint64_t kMaxRunSteps = 65536;

// Clamp a branch value into [0, 1]; NaN becomes 0 (as upstream's
// `v.max(0.0).min(1.0)`, where f32::max ignores NaN).
inline float clamp01(float v) { return v > 0.0f ? (v < 1.0f ? v : 1.0f) : 0.0f; }

// Fill `r` from one decoded step. With branches: bit i of ev_legal for each
// legal move, the legal moves' values clamped to [0, 1], the chosen move's
// value exactly 1.0 when it is legal (upstream's rule), 0 for illegal moves.
// Without branches (only with --allow-missing-branches): only the chosen move
// is legal, at 1.0.
inline void make_row(Row& r, uint64_t board, uint8_t move, const float* values, uint8_t legal,
                     bool present, uint32_t run_id, uint16_t step_index) {
  r.board = board;
  r.move = move;
  r.run_id = run_id;
  r.step_index = step_index;
  float ev[4] = {0, 0, 0, 0};
  uint8_t mask;
  if (present) {
    mask = legal & 0xF;
    for (unsigned i = 0; i < 4; ++i)
      if (mask >> i & 1) ev[i] = i == move ? 1.0f : clamp01(values[i]);
  } else {
    mask = static_cast<uint8_t>(1u << (move & 3));
    ev[move & 3] = 1.0f;
  }
  r.ev_legal = mask;
  std::memcpy(r.ev_values, ev, sizeof ev);
}

}  // namespace a2pack::dataset
