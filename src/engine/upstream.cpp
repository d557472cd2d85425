// Upstream ai-2048's spawn, normalisation and expectimax (see upstream.hpp).
// Values must be bit-identical to upstream's, so the arithmetic keeps its
// types (the path probability is a float, values are doubles), its order of
// operations, and no fused multiply-add (Rust never contracts).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "engine/upstream.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <vector>

#include "engine/moves.hpp"

namespace a2pack::engine::upstream {
namespace {

inline uint64_t line_of(uint64_t b, unsigned i) { return (b >> ((3 - i) * 16)) & 0xFFFF; }
inline double tile(uint64_t line, unsigned i) { return static_cast<double>((line >> ((3 - i) * 4)) & 0xF); }

// nneonneo's line heuristic with upstream's weights, for one 16-bit line.
double line_heuristic(uint64_t line) {
  double sum = 0, empty = 0;
  for (unsigned i = 0; i < 4; ++i) {
    sum += std::pow(tile(line, i), 3.5);
    if (tile(line, i) == 0) empty += 1;
  }
  double merges = 0, counter = 0, prev = 0;
  for (unsigned i = 0; i < 4; ++i) {
    const double t = tile(line, i);
    if (prev == t && t != 0) {
      counter += 1;
    } else if (counter > 0) {
      merges += 1 + counter;
      counter = 0;
    }
    prev = t;
  }
  if (counter > 0) merges += 1 + counter;
  double mono_left = 0, mono_right = 0;
  for (unsigned i = 1; i < 4; ++i) {
    const double a = tile(line, i - 1), b = tile(line, i);
    if (a > b)
      mono_left += std::pow(a, 4.0) - std::pow(b, 4.0);
    else
      mono_right += std::pow(b, 4.0) - std::pow(a, 4.0);
  }
  return 200000.0 + empty * 270.0 + merges * 700.0 - std::min(mono_left, mono_right) * 47.0 -
         sum * 11.0;
}

const std::vector<double>& line_table() {
  static const std::vector<double> table = [] {
    std::vector<double> t(65536);
    for (uint64_t i = 0; i < t.size(); ++i) t[i] = line_heuristic(i);
    return t;
  }();
  return table;
}

// Distinct non-empty tile values on the board.
int count_unique(uint64_t b) {
  uint32_t seen = 0;
  for (; b; b >>= 4) seen |= 1u << (b & 0xF);
  return std::popcount(seen >> 1);
}

}  // namespace

double heuristic_value(uint64_t b) {
  const auto& t = line_table();
  const uint64_t tb = transpose(b);
  double score = 0;
  for (unsigned i = 0; i < 4; ++i) score = score + t[line_of(b, i)] + t[line_of(tb, i)];
  return score;
}

uint64_t with_random_tile(uint64_t b, StdRng& rng) {
  uint64_t index = rng.below_u64(count_empty(b));
  uint64_t value = rng.below_u32(10) < 9 ? 1 : 2;
  for (unsigned shift = 0; shift < 64; shift += 4) {
    if ((b >> shift) & 0xF) continue;
    if (index-- == 0) return b | (value << shift);
  }
  return b;  // unreachable for a board with an empty cell
}

uint64_t make_move(uint64_t b, unsigned move, StdRng& rng) {
  const uint64_t moved = apply_move(b, move);
  return moved != b ? with_random_tile(moved, rng) : b;
}

void normalize_branches(const double ev[4], uint32_t legal_mask, float out[4]) {
  int n = 0;
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < 4; ++i) {
    out[i] = 0.0f;
    if (!(legal_mask & (1u << i))) continue;
    ++n;
    if (ev[i] < lo) lo = ev[i];
    if (ev[i] > hi) hi = ev[i];
  }
  if (n == 0) return;
  for (int i = 0; i < 4; ++i) {
    if (!(legal_mask & (1u << i))) continue;
    if (n == 1) {
      out[i] = 1.0f - FLT_EPSILON;
    } else if (std::fabs(hi - lo) < DBL_EPSILON) {
      out[i] = 0.5f;
    } else {
      float v = static_cast<float>(ev[i] - lo) / static_cast<float>(hi - lo);
      out[i] = v >= 1.0f ? 1.0f - FLT_EPSILON : v;
    }
  }
}

uint64_t Expectimax::depth_for(uint64_t b) const {
  const auto d = static_cast<uint64_t>(std::max(3, count_unique(b) - 2));
  return cfg_.has_depth_cap ? std::min(d, cfg_.depth_cap) : d;
}

void Expectimax::finish(uint64_t count) {
  nodes_ = count;
  peak_ = std::max(peak_, count);
}

double Expectimax::max_node(uint64_t b, uint64_t depth, float cprob, Cache& cache,
                            uint64_t& count, int* best) {
  ++count;
  double best_score = 0.0;
  int best_move = -1;
  for (unsigned m = 0; m < 4; ++m) {
    const uint64_t nb = apply_move(b, m);
    if (nb == b) continue;
    const double s = chance_node(nb, depth, cprob, cache, count);
    if (s > best_score) {
      best_score = s;
      best_move = static_cast<int>(m);
    }
  }
  if (best) *best = best_move;
  return best_score;
}

double Expectimax::chance_node(uint64_t b, uint64_t depth, float cprob, Cache& cache,
                               uint64_t& count) {
  ++count;
  if (depth == 0 || cprob < cfg_.prob_cutoff) return heuristic_value(b);
  if (cfg_.cache_enabled) {
    auto it = cache.find(b);
    if (it != cache.end() && it->second.depth >= depth) return it->second.score;
  }
  const uint64_t empty = count_empty(b);
  const float base = cprob / static_cast<float>(empty);
  double score = 0.0;
  for (unsigned shift = 0; shift < 64; shift += 4) {
    if ((b >> shift) & 0xF) continue;
    const uint64_t t = uint64_t{1} << shift;
    score += max_node(b | t, depth - 1, base * 0.9f, cache, count, nullptr) * 0.9;
    score += max_node(b | (t << 1), depth - 1, base * 0.1f, cache, count, nullptr) * 0.1;
  }
  score /= static_cast<double>(empty);
  if (cfg_.cache_enabled) cache[b] = Entry{score, depth};
  return score;
}

uint32_t Expectimax::branch_evals(uint64_t b, double ev[4]) {
  const uint64_t depth = depth_for(b);
  Cache cache;
  uint64_t count = 0;
  uint32_t legal = 0;
  for (unsigned m = 0; m < 4; ++m) {
    ev[m] = 0.0;
    const uint64_t nb = apply_move(b, m);
    if (nb == b) continue;
    ev[m] = chance_node(nb, depth, 1.0f, cache, count);
    legal |= 1u << m;
  }
  finish(count);
  return legal;
}

int Expectimax::best_move(uint64_t b) {
  Cache cache;
  uint64_t count = 0;
  int best = -1;
  max_node(b, depth_for(b), 1.0f, cache, count, &best);
  finish(count);
  return best;
}

double Expectimax::state_value(uint64_t b) {
  Cache cache;
  uint64_t count = 0;
  const double v = max_node(b, depth_for(b), 1.0f, cache, count, nullptr);
  finish(count);
  return v;
}

}  // namespace a2pack::engine::upstream
