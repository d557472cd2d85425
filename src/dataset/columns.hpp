// The training columns a gather writes, and how one 32-byte row becomes
// position i of them (shared by the dataset's and the shard stream's gathers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dataset/gather.hpp"
#include "dataset/row.hpp"

namespace a2pack::dataset {

// Columns a gather can write; null pointers are skipped.
struct ColumnsOut {
  uint8_t* exponents = nullptr;   // n * 16: tile exponents, cell 0 = top-left
  uint64_t* boards = nullptr;     // n
  uint8_t* moves = nullptr;       // n
  uint8_t* legal = nullptr;       // n * 4: 1 where the move is legal, else 0 (numpy bool)
  uint8_t* legal_mask = nullptr;  // n: the ev_legal bitmask
  float* ev_values = nullptr;     // n * 4
  uint32_t* run_ids = nullptr;    // n
  uint16_t* step_indices = nullptr; // n
  int32_t* moves_i32 = nullptr;   // n: the chosen move widened (a training loss's target type)
  int64_t* moves_i64 = nullptr;   // n
};

// 4 bytes of 0/1 per ev_legal mask, for the bool[n][4] column.
struct LegalTable {
  uint32_t t[16];
  constexpr LegalTable() : t{} {
    for (uint32_t m = 0; m < 16; ++m)
      t[m] = (m & 1) | ((m >> 1 & 1) << 8) | ((m >> 2 & 1) << 16) | ((m >> 3 & 1) << 24);
  }
};
constexpr LegalTable kLegal{};

// Row `row` as batch position i of the requested columns.
inline void emit_columns(size_t i, const uint8_t* row, const ColumnsOut& o) {
  Row r;
  std::memcpy(&r, row, kRowBytes);
  if (o.exponents) unpack_exponents(r.board, o.exponents + 16 * i);
  if (o.boards) o.boards[i] = r.board;
  if (o.moves) o.moves[i] = r.move;
  if (o.legal) std::memcpy(o.legal + 4 * i, &kLegal.t[r.ev_legal & 0xF], 4);
  if (o.legal_mask) o.legal_mask[i] = r.ev_legal;
  if (o.ev_values) std::memcpy(o.ev_values + 4 * i, r.ev_values, 16);
  if (o.run_ids) o.run_ids[i] = r.run_id;
  if (o.step_indices) o.step_indices[i] = r.step_index;
  if (o.moves_i32) o.moves_i32[i] = r.move;
  if (o.moves_i64) o.moves_i64[i] = r.move;
}

}  // namespace a2pack::dataset
