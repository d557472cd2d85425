// One game from a seed: spawn, choose, record, repeat until no move is left.
#include <fmt/format.h>

#include <bit>
#include <memory>

#include "base/error.hpp"
#include "engine/generator.hpp"
#include "engine/moves.hpp"
#include "engine/rng.hpp"
#include "engine/search.hpp"
#include "engine/spawn.hpp"
#include "run/board.hpp"
#include "run/branches.hpp"

namespace a2pack::engine {
namespace {

// Each extra move of lookahead multiplies the cost by ~8 x (empty cells):
// measured ~8 ms a game at depth 2, ~0.2 s at 3, ~5 s at 4. Past 6 a game
// would take days, which is never what a caller meant.
constexpr unsigned kMaxDepth = 6;

// elapsed_s is a model, not a clock, so that a seed gives the same bytes on
// every run and machine: roughly a human-paced 60 moves per second.
constexpr float kSecondsPerStep = 0.016f;

}  // namespace

void check_options(const GenOptions& o) {
  switch (o.policy) {
    case Policy::expectimax:
      if (o.depth < 1 || o.depth > kMaxDepth)
        fail(A2PACK_E_INVALID_ARGUMENT, "expectimax depth must be 1..{}, got {}", kMaxDepth,
             o.depth);
      break;
    case Policy::greedy:
    case Policy::random:
      break;
    default:
      fail(A2PACK_E_INVALID_ARGUMENT, "unknown policy {}", static_cast<int>(o.policy));
  }
}

namespace {

std::string engine_name(const GenOptions& o) {
  switch (o.policy) {
    case Policy::expectimax: return fmt::format("a2pack-gen/0.1 expectimax d{}", o.depth);
    case Policy::greedy: return "a2pack-gen/0.1 greedy";
    default: return "a2pack-gen/0.1 random";
  }
}

unsigned random_legal_move(uint32_t legal, Rng& rng) {
  unsigned k = rng.below(static_cast<uint32_t>(std::popcount(legal)));
  for (unsigned m = 0; m < 4; ++m)
    if ((legal & (1u << m)) && k-- == 0) return m;
  return 0;  // unreachable: k < number of legal moves
}

}  // namespace

run::Run play_game(const GenOptions& opts, uint64_t seed) {
  check_options(opts);
  Rng rng(seed);
  std::unique_ptr<Expectimax> search;
  if (opts.policy == Policy::expectimax) search = std::make_unique<Expectimax>(opts.depth);

  run::Run r;
  uint64_t b = spawn_tile(spawn_tile(0, rng), rng);
  while (opts.max_steps == 0 || r.size() < opts.max_steps) {
    const uint32_t legal = legal_moves(b);
    if (!legal) break;

    unsigned move;
    float values[4] = {0, 0, 0, 0};
    bool present = false;
    if (opts.policy == Policy::random) {
      move = random_legal_move(legal, rng);
    } else {
      MoveValues v = search ? search->evaluate(b) : greedy_values(b);
      // The chosen move is the argmax of the very floats being normalised, so
      // its normalised value is always the highest among the legal moves.
      move = v.best();
      run::normalise_branches(v.ev, v.legal, values);
      present = true;
    }

    r.boards.push_back(b);
    r.moves.push_back(static_cast<uint8_t>(move));
    r.values.insert(r.values.end(), values, values + 4);
    r.legal.push_back(present ? static_cast<uint8_t>(legal) : 0);
    r.present.push_back(present ? 1 : 0);

    b = spawn_tile(apply_move(b, move), rng);
  }

  r.final_board = b;
  r.source = run::Kind::v2;
  r.meta.steps = static_cast<uint32_t>(r.size());
  r.meta.start_unix_s = opts.start_unix_s;
  r.meta.elapsed_s = static_cast<float>(r.meta.steps) * kSecondsPerStep;
  r.meta.max_score = board::score(b);
  r.meta.highest_tile = board::highest_tile(b);
  r.meta.engine = engine_name(opts);
  return r;
}

}  // namespace a2pack::engine
