// C ABI of the board section.
#include "capi/common.hpp"
#include "engine/moves.hpp"
#include "engine/stdrng.hpp"
#include "engine/upstream.hpp"
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

// The upstream ai-2048 tool's random stream and spawn (engine/stdrng.hpp,
// engine/upstream.hpp), for the ai_2048 Python module.
struct a2pack_stdrng {
  engine::StdRng rng;
};

using a2pack::capi::guard;
using a2pack::capi::require;

A2PACK_EXPORT void a2pack_branches_normalise_f64(const double ev[4], uint32_t mask, float out[4]) {
  if (!ev || !out) return;
  engine::upstream::normalize_branches(ev, mask & 0xF, out);
}

A2PACK_EXPORT a2pack_status a2pack_stdrng_open(uint64_t seed, a2pack_stdrng** out) {
  capi::reset_out(out);
  return guard([&] {
    require(out, "out");
    *out = new a2pack_stdrng{engine::StdRng(seed)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_stdrng_clone(const a2pack_stdrng* rng, a2pack_stdrng** out) {
  capi::reset_out(out);
  return guard([&] {
    require(rng, "rng");
    require(out, "out");
    *out = new a2pack_stdrng{*rng};
  });
}

A2PACK_EXPORT void a2pack_stdrng_close(a2pack_stdrng* rng) { delete rng; }

A2PACK_EXPORT a2pack_status a2pack_stdrng_shuffle(a2pack_stdrng* rng, uint64_t* items, size_t n) {
  return guard([&] {
    require(rng, "rng");
    if (n) require(items, "items");
    rng->rng.shuffle(items, n);
  });
}

A2PACK_EXPORT a2pack_status a2pack_board_spawn_stdrng(uint64_t b, a2pack_stdrng* rng,
                                                      uint64_t* out) {
  return guard([&] {
    require(rng, "rng");
    require(out, "out");
    if (engine::count_empty(b) == 0)
      fail(A2PACK_E_INVALID_ARGUMENT, "board {:#018x} is full: no empty cell to spawn a tile in", b);
    *out = engine::upstream::with_random_tile(b, rng->rng);
  });
}

A2PACK_EXPORT a2pack_status a2pack_board_make_move_stdrng(uint64_t b, uint32_t move,
                                                          a2pack_stdrng* rng, uint64_t* out) {
  return guard([&] {
    require(rng, "rng");
    require(out, "out");
    if (move > 3) fail(A2PACK_E_INVALID_ARGUMENT, "move {} is not 0..3 (Up, Down, Left, Right)", move);
    *out = engine::upstream::make_move(b, move, rng->rng);
  });
}
