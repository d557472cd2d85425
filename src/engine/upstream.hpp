// The game rules, spawn and search of the upstream `ai-2048` tool, as its
// Python module exposes them (Board.with_random_tile / make_move, Expectimax,
// normalize_branches). a2pack's `ai_2048` Python module is built on these, so
// code written for upstream's module gets the same boards, moves and branch
// values. Moves themselves are a2pack's (engine/moves.hpp): the rules agree,
// except that a2pack never merges two 32768 tiles, where upstream's tables
// overflow the nibble.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "engine/stdrng.hpp"

namespace a2pack::engine::upstream {

// A 2 (p = 0.9) or 4 in a random empty cell; the cell is drawn first, as the
// k-th empty cell counted from cell 15 (the low nibble) upward. The board
// must have an empty cell (upstream panics on a full one; callers check).
uint64_t with_random_tile(uint64_t b, StdRng& rng);

// Slide, then spawn only when the slide changed the board.
uint64_t make_move(uint64_t b, unsigned move, StdRng& rng);

// Upstream's normalisation of raw f64 branch values (UDLR): one legal move
// gives 1 - FLT_EPSILON, equal values (within DBL_EPSILON) 0.5 each, else
// (ev - min) / (max - min) in float, capped just below 1. out[i] is 0 for an
// illegal move.
void normalize_branches(const double ev[4], uint32_t legal_mask, float out[4]);

struct SearchConfig {
  float prob_cutoff = 1e-4f;  // chance nodes whose path probability is lower: heuristic
  bool has_depth_cap = false;
  uint64_t depth_cap = 0;     // caps the dynamic depth max(3, distinct tiles - 2)
  bool cache_enabled = true;  // transposition table over one call's chance nodes
};

// Upstream's single-threaded expectimax, node for node: the same depth rule,
// heuristic, pruning, cache and visiting order, so values are bit-identical.
// Not thread-safe; one object per thread.
class Expectimax {
 public:
  explicit Expectimax(const SearchConfig& cfg) : cfg_(cfg) {}

  // Root value of each move (UDLR); ev[m] = 0 and bit m clear for an
  // illegal move. Returns the legal mask.
  uint32_t branch_evals(uint64_t b, double ev[4]);
  // Best move (0..3), or -1 when no move is legal.
  int best_move(uint64_t b);
  // Value of the root max node (0 when no move is legal).
  double state_value(uint64_t b);

  uint64_t last_nodes() const { return nodes_; }
  uint64_t peak_nodes() const { return peak_; }
  void reset_stats() { nodes_ = peak_ = 0; }

 private:
  struct Entry {
    double score;
    uint64_t depth;
  };
  using Cache = std::unordered_map<uint64_t, Entry>;

  uint64_t depth_for(uint64_t b) const;
  double max_node(uint64_t b, uint64_t depth, float cprob, Cache& cache, uint64_t& count,
                  int* best);
  double chance_node(uint64_t b, uint64_t depth, float cprob, Cache& cache, uint64_t& count);
  void finish(uint64_t count);

  SearchConfig cfg_;
  uint64_t nodes_ = 0, peak_ = 0;
};

// The search's leaf value of a board (exposed for tests).
double heuristic_value(uint64_t b);

}  // namespace a2pack::engine::upstream
