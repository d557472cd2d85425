// Table-driven 2048 moves on u64 boards (the board layout of docs/run-files.md: cell 0 is the
// top-left nibble, the most significant one).
#pragma once

#include <cstdint>

namespace a2pack::engine {

// Board after sliding (no spawn); equal to b when the move is illegal.
// move: 0 Up, 1 Down, 2 Left, 3 Right.
uint64_t apply_move(uint64_t b, unsigned move);

// Bit i set when move i changes the board.
uint32_t legal_moves(uint64_t b);

// Transpose rows and columns.
uint64_t transpose(uint64_t b);

// Number of empty cells.
unsigned count_empty(uint64_t b);

// out[m] = apply_move(b, m) for all four moves, sharing one transpose; the
// search calls this at every node.
void apply_all_moves(uint64_t b, uint64_t out[4]);

}  // namespace a2pack::engine
