// nneonneo's 2048 heuristic (github.com/nneonneo/2048-ai), table-driven: each
// of the 65536 possible lines gets a score for empty cells, adjacent equal
// tiles (merges to come), monotonicity and a penalty on large tile sums.
// Lines are scored the same in both directions, so the row orientation of
// our layout does not matter.
#include "engine/heuristic.hpp"

#include <cmath>

#include "engine/moves.hpp"

namespace a2pack::engine {
namespace {

// nneonneo's tuned weights. The per-line baseline keeps most boards above 0,
// but not all: a non-monotone line such as 256, 0, 256, 0 already scores
// below 0, and the lowest line (2^15, 2, 2^15, 2^15) scores about -2.6e6.
constexpr double kLostPenalty = 200000.0;
constexpr double kMonotonicityWeight = 47.0;  // on rank^4
constexpr double kSumWeight = 11.0;           // on rank^3.5
constexpr double kMergesWeight = 700.0;
constexpr double kEmptyWeight = 270.0;

// The powers are spelled out instead of std::pow: pow is not correctly
// rounded in every libm, while *, sqrt and integer powers are exact or
// IEEE-rounded, so the tables (and so the games) are the same everywhere.
double pow4(unsigned rank) {
  double r = rank;
  return r * r * r * r;
}
double pow_sum(unsigned rank) {
  double r = rank;
  return r * r * r * std::sqrt(r);
}

float line_score(unsigned row) {
  unsigned line[4];
  for (unsigned j = 0; j < 4; ++j) line[j] = (row >> (12 - 4 * j)) & 0xF;

  double sum = 0;
  int empty = 0, merges = 0;
  unsigned prev = 0, counter = 0;
  for (unsigned rank : line) {
    sum += pow_sum(rank);
    if (rank == 0) {
      ++empty;
    } else {
      if (prev == rank) {
        ++counter;
      } else if (counter > 0) {
        merges += 1 + counter;
        counter = 0;
      }
      prev = rank;
    }
  }
  if (counter > 0) merges += 1 + counter;

  double mono_left = 0, mono_right = 0;
  for (unsigned j = 1; j < 4; ++j) {
    double a = pow4(line[j - 1]);
    double b = pow4(line[j]);
    if (line[j - 1] > line[j]) mono_left += a - b;
    else mono_right += b - a;
  }
  double mono = mono_left < mono_right ? mono_left : mono_right;

  return static_cast<float>(kLostPenalty + kEmptyWeight * empty + kMergesWeight * merges -
                            kMonotonicityWeight * mono - kSumWeight * sum);
}

struct Table {
  float line[65536];
  Table() {
    for (unsigned r = 0; r < 65536; ++r) line[r] = line_score(r);
  }
};

const Table& table() {
  static const Table t;
  return t;
}

inline float rows_score(const float* t, uint64_t b) {
  return t[(b >> 48) & 0xFFFF] + t[(b >> 32) & 0xFFFF] + t[(b >> 16) & 0xFFFF] + t[b & 0xFFFF];
}

}  // namespace

float heuristic(uint64_t b) {
  const float* t = table().line;
  return rows_score(t, b) + rows_score(t, transpose(b));
}

}  // namespace a2pack::engine
