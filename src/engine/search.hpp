// Move evaluation for the policies that record branch values.
#pragma once

#include <cstdint>
#include <vector>

namespace a2pack::engine {

// Raw value of each move (UDLR) on one board; 0 for illegal moves.
struct MoveValues {
  float ev[4] = {0, 0, 0, 0};
  uint32_t legal = 0;  // bit m set when move m changes the board

  // Highest-valued legal move, the lowest index on ties; legal must be non-zero.
  unsigned best() const;
};

// One ply: heuristic of the board after each move plus the score it gains.
MoveValues greedy_values(uint64_t b);

// Expectimax over `depth` moves (the root move included): max nodes over
// moves, chance nodes averaging every empty cell x {2: 0.9, 4: 0.1}, the
// heuristic at the leaves. Like nneonneo's, chance nodes whose path
// probability drops below a cutoff are scored by the heuristic directly, and
// chance-node values are cached per root evaluation. One object per game
// (not thread-safe); results depend only on the boards evaluated, in order.
class Expectimax {
 public:
  explicit Expectimax(unsigned depth);
  MoveValues evaluate(uint64_t b);

 private:
  struct Entry {
    uint64_t board;
    uint32_t stamp;     // evaluation the entry belongs to; others are stale
    uint32_t depth;     // curdepth it was computed at (lower = searched deeper)
    double value;
  };
  double chance_node(uint64_t b, double cprob, unsigned curdepth);
  double move_node(uint64_t b, double cprob, unsigned curdepth);

  unsigned depth_;
  uint32_t stamp_ = 0;
  std::vector<Entry> cache_;  // direct-mapped; empty when depth < 3 (nothing to share)
};

}  // namespace a2pack::engine
