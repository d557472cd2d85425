// Prioritized experience replay's priorities (Schaul et al., 2016): one
// priority p_i >= 0 per row, rows drawn with probability p_i^alpha / sum,
// importance weights (N * P(i))^-beta normalised by a batch's largest.
//
// Layout: the priorities as given (f32) and p^alpha (f32) per row, and a sum
// tree of doubles over blocks of 16 rows: 8 bytes a row plus 1 for the tree.
// Sampling finds a block in O(log n) and scans its 16 leaves; an update
// changes a leaf, its block sum and the block's O(log n) ancestors. The
// tree's sums are doubles, so a billion rows of small priorities keep their
// mass.
//
// Thread safety: update() and grow() take the lock exclusively, sample()
// and the readers share it, so a learner may update while producers
// sample; each sample sees the priorities of before or after a whole update.
//
// Why by hand: no library we link has a sum tree; TorchRL's and Reverb's are
// parts of their replay buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

namespace a2pack::order {

class Priorities {
 public:
  // n rows of priority `initial`. INVALID_ARGUMENT, naming the value, for
  // n == 0, alpha or beta negative or not finite, initial negative or not
  // finite.
  Priorities(uint64_t n, double alpha, double beta, float initial);

  uint64_t size() const;
  double alpha() const { return alpha_; }
  double beta() const { return beta_; }
  // The sum of p^alpha over all rows.
  double total() const;
  // Priorities of rows idx[0..k) to out (OUT_OF_RANGE for an index outside).
  void get(const int64_t* idx, size_t k, float* out) const;

  // Set rows idx[0..k) to values[0..k) (a row named twice takes the last).
  // Everything is checked first and nothing changes when anything is
  // refused: OUT_OF_RANGE for an index outside [0, n), INVALID_ARGUMENT for
  // a value negative, NaN or infinite, each naming it and its position.
  void update(const int64_t* idx, const float* values, size_t k);
  // Rows [size(), new_n) join with priority `initial`.
  void grow(uint64_t new_n, float initial);

  // Draw k rows of [lo, hi) with probability p^alpha / (the range's sum),
  // stratified (k equal parts of the mass, one uniform draw in each),
  // deterministic in (seed, stream) and the priorities. Rows of priority 0
  // are never drawn. Their importance weights (N * P(i))^-beta, N = hi - lo,
  // divided by the largest of the k, to weights (may be null).
  // INVALID_ARGUMENT when every priority of the range is 0.
  void sample(uint64_t lo, uint64_t hi, size_t k, uint64_t seed, uint64_t stream, int64_t* out,
              float* weights) const;

  // The priorities as a .npy of f32 (shape (n,)), written to a temporary
  // file beside `path`, synced and renamed over it.
  void save(const std::string& path) const;
  // Read priorities saved by save() (or numpy: '<f4', shape (n,)).
  // `expected_n` (0: any) refuses a file of another length, naming both.
  // Errors name the file and what was wrong.
  static std::unique_ptr<Priorities> load(const std::string& path, double alpha, double beta,
                                          uint64_t expected_n);

 private:
  static constexpr uint64_t kBlock = 16;
  void check_value(float v, size_t position) const;
  void rebuild();  // every block sum and the tree, from pa_
  double prefix(uint64_t row) const;  // sum of p^alpha over rows [0, row)
  // Targets t[a, b) (ascending masses) below `node`, whose subtree starts
  // at mass `before`: the rows they fall on, to out[a, b).
  void descend(uint64_t node, double before, const double* t, size_t a, size_t b, uint64_t lo,
               uint64_t hi, int64_t* out) const;
  // The row of `block` that mass `target` (from the block's start) falls on,
  // kept inside [lo, hi) and off rows without mass.
  uint64_t find_in_block(uint64_t block, double target, uint64_t lo, uint64_t hi) const;

  double alpha_, beta_;
  std::vector<float> p_, pa_;   // the priorities, and p^alpha
  uint64_t leaves_ = 1;         // blocks, rounded up to a power of two
  std::vector<double> tree_;    // 2 * leaves_: node i's children 2i, 2i + 1; leaves at leaves_
  mutable std::shared_mutex mu_;
};

}  // namespace a2pack::order
