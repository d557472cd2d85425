// Expectimax search in the style of nneonneo's 2048 AI.
#include <cstddef>

#include "engine/heuristic.hpp"
#include "engine/moves.hpp"
#include "engine/search.hpp"

namespace a2pack::engine {
namespace {

// Chance branches this unlikely along their whole path are not expanded
// (nneonneo's CPROB_THRESH_BASE): they barely move the average.
constexpr double kProbabilityCutoff = 1e-4;
// A lost game scores below every board (the heuristic is above -2.1e7).
// nneonneo scores it 0, which ranks the rare board with a negative heuristic
// below a loss; measured over 1000 games the change plays the same.
constexpr double kDeadEnd = -1e9;
constexpr unsigned kCacheBits = 18;  // 256 Ki entries x 24 B = 6 MiB

inline uint64_t cache_slot(uint64_t b) {
  // Fibonacci hashing: boards differ mostly in low-order cells.
  return (b * 0x9E3779B97F4A7C15ull) >> (64 - kCacheBits);
}

}  // namespace

Expectimax::Expectimax(unsigned depth) : depth_(depth) {
  // With fewer than 3 moves the only chance nodes that are expanded are the
  // root's children, which never repeat; a cache would cost without helping.
  if (depth_ >= 3) cache_.assign(size_t{1} << kCacheBits, Entry{0, 0, 0, 0.0});
}

MoveValues Expectimax::evaluate(uint64_t b) {
  MoveValues v;
  // A fresh stamp invalidates the previous move's entries without clearing.
  // 0 marks never-written entries, so skip it on wrap-around.
  if (++stamp_ == 0) ++stamp_;
  uint64_t after[4];
  apply_all_moves(b, after);
  for (unsigned m = 0; m < 4; ++m) {
    if (after[m] == b) continue;
    v.legal |= 1u << m;
    v.ev[m] = static_cast<float>(chance_node(after[m], 1.0, 0));
  }
  return v;
}

// b: board after a move, before the spawn. curdepth: moves made since the
// root move.
double Expectimax::chance_node(uint64_t b, double cprob, unsigned curdepth) {
  if (curdepth + 1 >= depth_ || cprob < kProbabilityCutoff) return heuristic(b);

  Entry* slot = nullptr;
  if (!cache_.empty()) {
    slot = &cache_[cache_slot(b)];
    // Reuse a value searched at least as deep as we would search now.
    if (slot->stamp == stamp_ && slot->board == b && slot->depth <= curdepth) return slot->value;
  }

  const unsigned empty = count_empty(b);
  if (empty == 0) return heuristic(b);  // cannot happen after a legal move; be safe
  const double cell_prob = cprob / empty;
  double sum = 0;
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned shift = 60 - 4 * i;
    if ((b >> shift) & 0xF) continue;
    sum += 0.9 * move_node(b | (uint64_t{1} << shift), cell_prob * 0.9, curdepth + 1);
    sum += 0.1 * move_node(b | (uint64_t{2} << shift), cell_prob * 0.1, curdepth + 1);
  }
  const double value = sum / empty;

  if (slot) *slot = Entry{b, stamp_, curdepth, value};
  return value;
}

// b: board after a spawn, the player to move.
double Expectimax::move_node(uint64_t b, double cprob, unsigned curdepth) {
  uint64_t after[4];
  apply_all_moves(b, after);
  double best = kDeadEnd;
  for (unsigned m = 0; m < 4; ++m) {
    if (after[m] == b) continue;
    double v = chance_node(after[m], cprob, curdepth);
    if (v > best) best = v;
  }
  return best;
}

}  // namespace a2pack::engine
