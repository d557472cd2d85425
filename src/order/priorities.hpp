// Prioritized experience replay's priorities (Schaul et al., 2016): one
// priority p_i >= 0 per row, rows drawn with probability p_i^alpha / sum,
// importance weights (N * P(i))^-beta normalised by a batch's largest.
//
// Layout: the priorities as given (f32) and p^alpha (f32) per row, and a sum
// tree of doubles over blocks of 16 rows: 8 bytes a row, plus 16 bytes per
// leaf of the tree for 1 to 2 bytes a row (the blocks rounded up to a power
// of two): 9 bytes a row at 2^20 rows, 9.3 at 10^8. Sampling finds a block
// in O(log n) and scans its 16 leaves; an update changes a leaf, its block
// sum and the block's O(log n) ancestors. The tree's sums are doubles, so a
// billion rows of small priorities keep their mass.
//
// A range [lo, hi) is drawn from its own pieces (the rows of its partial
// blocks and the O(log n) subtrees that cover its whole blocks), not as a
// difference of prefix sums: the newest rows' mass is not lost beside the
// mass of the older ones however far apart they are.
//
// Thread safety: update() and grow() take the lock exclusively, sample()
// and the readers share it, so a learner may update while producers
// sample; each sample sees the priorities of before or after a whole update.
// A writer waiting for the lock holds back new readers (a gate before the
// shared lock), so producers sampling back to back never starve the learner.
//
// Why by hand: no library we link has a sum tree; TorchRL's and Reverb's are
// parts of their replay buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace a2pack::order {

class Priorities {
 public:
  // n rows of priority `initial`. INVALID_ARGUMENT, naming the value, for
  // n == 0, alpha or beta negative or not finite, initial negative or not
  // finite (or so large that initial^alpha is beyond a float).
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
  // a value negative, NaN or infinite (or whose p^alpha is beyond a float),
  // each naming it and its position.
  void update(const int64_t* idx, const float* values, size_t k);
  // Rows [size(), new_n) join with priority `initial` (nothing when new_n
  // is not larger). O(new rows + log n) unless the tree must double.
  void grow(uint64_t new_n, float initial);
  // The largest priority the rows were given (at construction, by an
  // update or a grow, or in the loaded file): what rows appended to a live
  // dataset start with, so that each is drawn soon.
  float largest() const;

  // Draw k rows of [lo, hi) with probability p^alpha / (the range's sum),
  // stratified (k equal parts of the mass, one uniform draw in each, so the
  // rows ascend), deterministic in (seed, stream) and the priorities. Rows
  // of priority 0 are never drawn, whatever alpha. Their importance weights
  // (N * P(i))^-beta, N = hi - lo, divided by the largest of the k, to
  // weights (may be null). OUT_OF_RANGE for a range empty or past the rows,
  // INVALID_ARGUMENT when every priority of the range is 0.
  void sample(uint64_t lo, uint64_t hi, size_t k, uint64_t seed, uint64_t stream, int64_t* out,
              float* weights) const;
  // As sample(), keeping only rows `accept` takes: the others are drawn
  // again (up to max_rounds more times, each round from a stream of its
  // own), all under one hold of the lock, so that the accepted rows keep
  // probabilities proportional to p^alpha among themselves; the weights are
  // theirs. Returns how many draws were still refused (weights then unset).
  size_t sample_where(uint64_t lo, uint64_t hi, size_t k, uint64_t seed, uint64_t stream,
                      const std::function<bool(uint64_t)>& accept, int max_rounds, int64_t* out,
                      float* weights) const;

  // The priorities as a .npy of f32 (NPY 1.0, '<f4', shape (n,)), written
  // in one write to a temporary file beside `path`, synced and renamed over
  // it.
  void save(const std::string& path) const;
  // Read priorities saved by save() (or numpy: '<f4', shape (n,)).
  // `expected_n` (0: any) refuses a file of another length, naming both
  // (INVALID_ARGUMENT). A damaged file is CORRUPT; errors name the file and
  // what was wrong.
  static std::unique_ptr<Priorities> load(const std::string& path, double alpha, double beta,
                                          uint64_t expected_n);

 private:
  static constexpr uint64_t kBlock = 16;
  // Part of a range: rows [first, end) of one block (node 0), or a node of
  // the tree whose blocks all lie inside the range.
  struct Piece {
    uint64_t node, first, end;
    double mass;
  };

  Priorities(double alpha, double beta) : alpha_(alpha), beta_(beta) {}
  // k stratified draws of [lo, hi) (the lock held).
  void draw(uint64_t lo, uint64_t hi, size_t k, uint64_t seed, uint64_t stream, int64_t* out) const;
  // The drawn rows' importance weights, normalised by the largest (the lock held).
  void weigh(const int64_t* out, size_t k, float* weights) const;
  // v^alpha, after refusing v (and a v^alpha a float cannot hold).
  float checked_power(float v, size_t position) const;
  void rebuild();  // the tree's shape, every block sum and every node, from pa_
  // Block sums of blocks [first, end) and their ancestors.
  void refresh_blocks(uint64_t first, uint64_t end);
  double block_sum(uint64_t block) const;
  // [lo, hi) as pieces in row order.
  void pieces(uint64_t lo, uint64_t hi, std::vector<Piece>& out) const;
  void cover(uint64_t node, uint64_t node_first, uint64_t width, uint64_t first, uint64_t end,
             std::vector<Piece>& out) const;
  // Targets t[0, k) (masses, each at least `before`) below `node`, whose
  // subtree starts at mass `before`: the rows they fall on, to out[0, k).
  void descend(uint64_t node, double before, const double* t, size_t k, int64_t* out) const;
  // The row of [first, end) that mass `target` (from `first`) falls on: never
  // one without mass (rounding past the end takes the last with some).
  uint64_t find_in_rows(uint64_t first, uint64_t end, double target) const;
  // Readers pass the gate before taking the shared lock; a writer holds it
  // while it waits for the exclusive one.
  std::shared_lock<std::shared_mutex> read_lock() const;
  std::unique_lock<std::shared_mutex> write_lock();

  double alpha_, beta_;
  std::vector<float> p_, pa_;   // the priorities, and p^alpha
  float largest_ = 0;           // see largest()
  uint64_t leaves_ = 1;         // blocks, rounded up to a power of two
  std::vector<double> tree_;    // 2 * leaves_: node i's children 2i, 2i + 1; leaves at leaves_
  mutable std::shared_mutex mu_;
  mutable std::mutex gate_;
};

}  // namespace a2pack::order
