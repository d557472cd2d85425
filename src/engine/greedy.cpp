// The one-ply policy and MoveValues::best, shared by both searching policies.
#include "engine/heuristic.hpp"
#include "engine/moves.hpp"
#include "engine/search.hpp"
#include "run/board.hpp"

namespace a2pack::engine {

unsigned MoveValues::best() const {
  unsigned best = 4;
  for (unsigned m = 0; m < 4; ++m) {
    if (!(legal & (1u << m))) continue;
    if (best == 4 || ev[m] > ev[best]) best = m;
  }
  return best;
}

MoveValues greedy_values(uint64_t b) {
  MoveValues v;
  uint64_t after[4];
  apply_all_moves(b, after);
  // board::score counts every merge ever made, so the difference is exactly
  // this move's merge score.
  const double before = static_cast<double>(board::score(b));
  for (unsigned m = 0; m < 4; ++m) {
    if (after[m] == b) continue;
    v.legal |= 1u << m;
    v.ev[m] = static_cast<float>(static_cast<double>(heuristic(after[m])) +
                                 static_cast<double>(board::score(after[m])) - before);
  }
  return v;
}

}  // namespace a2pack::engine
