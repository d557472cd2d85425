// C ABI of the board section.
#include "capi/common.hpp"
#include "engine/moves.hpp"
#include "run/board.hpp"
#include "run/branches.hpp"

using namespace a2pack;

A2PACK_EXPORT uint64_t a2pack_board_score(uint64_t b) { return board::score(b); }
A2PACK_EXPORT uint32_t a2pack_board_highest_tile(uint64_t b) { return board::highest_tile(b); }
A2PACK_EXPORT uint64_t a2pack_board_apply_move(uint64_t b, uint32_t move) {
  return move < 4 ? engine::apply_move(b, move) : b;
}
A2PACK_EXPORT uint32_t a2pack_board_legal_moves(uint64_t b) { return engine::legal_moves(b); }
A2PACK_EXPORT void a2pack_branches_normalise(const float ev[4], uint32_t mask, float out[4]) {
  if (!ev || !out) return;
  run::normalise_branches(ev, mask & 0xF, out);
}
