// Moves by table lookup: every 16-bit row has its left/right result
// precomputed, and columns go through a transpose so Up/Down reuse the same
// row logic (the board layout of docs/run-files.md).
#include "engine/moves.hpp"

#include <bit>

namespace a2pack::engine {
namespace {

// Column j of a 16-bit row is its nibble 3 - j (column 0 is the high nibble,
// matching cell 0 being the board's high nibble).
unsigned row_cell(unsigned row, unsigned j) { return (row >> (12 - 4 * j)) & 0xF; }

// Slide a row toward column 0. Each tile merges at most once, pairs are taken
// from the side the tiles move toward, and 15 never merges: 2^16 does not fit
// a nibble.
unsigned slide_toward_first(unsigned row) {
  unsigned tiles[4], n = 0;
  for (unsigned j = 0; j < 4; ++j)
    if (unsigned e = row_cell(row, j)) tiles[n++] = e;
  unsigned out = 0, pos = 0;
  for (unsigned i = 0; i < n; ++pos) {
    unsigned e = tiles[i];
    if (i + 1 < n && tiles[i + 1] == e && e < 15) {
      ++e;
      i += 2;
    } else {
      i += 1;
    }
    out |= e << (12 - 4 * pos);
  }
  return out;
}

unsigned reverse_row(unsigned row) {
  return ((row & 0xF) << 12) | ((row & 0xF0) << 4) | ((row & 0xF00) >> 4) | (row >> 12);
}

// A row's four nibbles placed down column 0 of a board (cells 0, 4, 8, 12).
uint64_t row_to_column(unsigned row) {
  uint64_t c = 0;
  for (unsigned j = 0; j < 4; ++j) c |= static_cast<uint64_t>(row_cell(row, j)) << (60 - 16 * j);
  return c;
}

struct Tables {
  uint16_t left[65536];
  uint16_t right[65536];
  uint64_t up[65536];    // a transposed row (an original column) moved up, as column 0
  uint64_t down[65536];

  Tables() {
    for (unsigned r = 0; r < 65536; ++r) {
      unsigned l = slide_toward_first(r);
      unsigned rt = reverse_row(slide_toward_first(reverse_row(r)));
      left[r] = static_cast<uint16_t>(l);
      right[r] = static_cast<uint16_t>(rt);
      up[r] = row_to_column(l);
      down[r] = row_to_column(rt);
    }
  }
};

const Tables& tables() {
  static const Tables t;  // built once, thread-safe (magic static)
  return t;
}

inline unsigned row_of(uint64_t b, unsigned r) { return (b >> (48 - 16 * r)) & 0xFFFF; }

inline uint64_t rows_via(uint64_t b, const uint16_t* table) {
  uint64_t out = 0;
  for (unsigned r = 0; r < 4; ++r) out |= static_cast<uint64_t>(table[row_of(b, r)]) << (48 - 16 * r);
  return out;
}

// t is the transposed board: its row c is column c of the original.
inline uint64_t cols_via(uint64_t t, const uint64_t* table) {
  uint64_t out = 0;
  for (unsigned c = 0; c < 4; ++c) out |= table[row_of(t, c)] >> (4 * c);
  return out;
}

}  // namespace

uint64_t transpose(uint64_t x) {
  // Swap nibbles across the diagonal in two rounds (2x2 blocks of nibbles,
  // then 2x2 blocks of bytes). The layout reverses nneonneo's cell order,
  // which maps the diagonal to itself, so the same masks apply.
  uint64_t a1 = x & 0xF0F00F0FF0F00F0Full;
  uint64_t a2 = x & 0x0000F0F00000F0F0ull;
  uint64_t a3 = x & 0x0F0F00000F0F0000ull;
  uint64_t a = a1 | (a2 << 12) | (a3 >> 12);
  uint64_t b1 = a & 0xFF00FF0000FF00FFull;
  uint64_t b2 = a & 0x00FF00FF00000000ull;
  uint64_t b3 = a & 0x00000000FF00FF00ull;
  return b1 | (b2 >> 24) | (b3 << 24);
}

unsigned count_empty(uint64_t b) {
  // Fold each nibble's bits into its low bit: 1 when the nibble is non-zero.
  b |= (b >> 2) & 0x3333333333333333ull;
  b |= b >> 1;
  return static_cast<unsigned>(std::popcount(~b & 0x1111111111111111ull));
}

uint64_t apply_move(uint64_t b, unsigned move) {
  const Tables& t = tables();
  switch (move) {
    case 0: return cols_via(transpose(b), t.up);
    case 1: return cols_via(transpose(b), t.down);
    case 2: return rows_via(b, t.left);
    case 3: return rows_via(b, t.right);
    default: return b;
  }
}

void apply_all_moves(uint64_t b, uint64_t out[4]) {
  const Tables& t = tables();
  uint64_t tr = transpose(b);
  out[0] = cols_via(tr, t.up);
  out[1] = cols_via(tr, t.down);
  out[2] = rows_via(b, t.left);
  out[3] = rows_via(b, t.right);
}

uint32_t legal_moves(uint64_t b) {
  uint64_t after[4];
  apply_all_moves(b, after);
  uint32_t mask = 0;
  for (unsigned m = 0; m < 4; ++m)
    if (after[m] != b) mask |= 1u << m;
  return mask;
}

}  // namespace a2pack::engine
