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

// nneonneo's tuned weights. The baseline keeps every live line positive.
constexpr double kLostPenalty = 200000.0;
constexpr double kMonotonicityPower = 4.0;
constexpr double kMonotonicityWeight = 47.0;
constexpr double kSumPower = 3.5;
constexpr double kSumWeight = 11.0;
constexpr double kMergesWeight = 700.0;
constexpr double kEmptyWeight = 270.0;

float line_score(unsigned row) {
  unsigned line[4];
  for (unsigned j = 0; j < 4; ++j) line[j] = (row >> (12 - 4 * j)) & 0xF;

  double sum = 0;
  int empty = 0, merges = 0;
  unsigned prev = 0, counter = 0;
  for (unsigned rank : line) {
    sum += std::pow(static_cast<double>(rank), kSumPower);
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
    double a = std::pow(static_cast<double>(line[j - 1]), kMonotonicityPower);
    double b = std::pow(static_cast<double>(line[j]), kMonotonicityPower);
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
    // std::pow on small integers with integer-valued or .5 powers is exact
    // enough that every libm agrees after rounding to float.
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
