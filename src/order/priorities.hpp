// Prioritized experience replay's priorities (Schaul et al., 2016): one
// priority p_i >= 0 per row, rows drawn with probability p_i^alpha / sum,
// importance weights (N * P(i))^-beta normalised by a batch's largest.
//
// Layout: the priorities as given (f32, 4 bytes a row), and a sum tree of
// doubles over blocks of 8 rows whose nodes have 8 children each, side by
// side (one 64-byte cache line): 8 bytes per block and a seventh of that for
// the nodes above, 1.14 bytes a row: 5.14 bytes a row in all. Grown (a live
// dataset's appends), the values and the blocks keep room for a quarter
// more: 6.4 bytes a row at most. p^alpha is not stored: it is
// computed where it is read (the 8 rows of a drawn block, a changed block's
// 8 rows, a drawn row's weight), which costs a draw of 4 096 rows about as
// much as the tree's cache misses do and halves the memory. Sampling finds
// a block in O(log8 n) steps of one cache line each and scans its 8 rows; an
// update changes the row, the block sum and the block's O(log8 n)
// ancestors. Eight children a node rather than two: a third of the levels,
// so a third of the cache misses on a tree larger than the caches. The sums
// are doubles, so a billion rows of small priorities keep their mass.
//
// A range [lo, hi) is drawn from its own pieces (the rows of its partial
// blocks and the O(log n) subtrees that cover its whole blocks), not as a
// difference of prefix sums: the newest rows' mass is not lost beside the
// mass of the older ones however far apart they are.
//
// Thread safety: update() checks its rows and leaves them for the next
// reader, which applies them under the lock taken exclusively (as grow()
// takes it); sample() and the readers share it, so a learner may update
// while producers sample, and each sample sees the priorities of before or
// after a whole update.
// A writer waiting for the lock holds back new readers (a gate before the
// shared lock), so producers sampling back to back never starve the learner.
//
// Why by hand: no library we link has a sum tree; TorchRL's and Reverb's are
// parts of their replay buffers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "base/uninit_vector.hpp"

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
  // The memory held for the rows: the priorities and the sum tree (5.14
  // bytes a row; up to 6.4 when grown). Updates waiting for a reader take 12 bytes a row more
  // while they wait, kMaxPending rows at most.
  uint64_t bytes() const;
  // Priorities of rows idx[0..k) to out (OUT_OF_RANGE for an index outside).
  void get(const int64_t* idx, size_t k, float* out) const;

  // Set rows idx[0..k) to values[0..k) (a row named twice takes the last).
  // Everything is checked first and nothing changes when anything is
  // refused: OUT_OF_RANGE for an index outside [0, n), INVALID_ARGUMENT for
  // a value negative, NaN or infinite (or whose p^alpha is beyond a float),
  // each naming it and its position.
  // The rows are applied by the next reader (a draw, get, save or total),
  // so that the learner's update never does the tree's work; with
  // kMaxPending rows waiting, the update applies them itself.
  void update(const int64_t* idx, const float* values, size_t k);
  // Rows of updates left waiting before an update applies them (12 bytes
  // each: 12 MiB at most).
  static constexpr size_t kMaxPending = size_t{1} << 20;
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
  static constexpr uint64_t kBlock = 8;
  static constexpr uint64_t kFan = 8;  // children a node: one cache line of doubles
  // Part of a range: rows [first, end) of one block (level -1), or node
  // `index` of tree level `level` whose blocks all lie inside the range.
  struct Piece {
    int level;
    uint64_t index, first, end;
    double mass;
  };

  Priorities(double alpha, double beta) : alpha_(alpha), beta_(beta) {}
  // k stratified draws of [lo, hi) (the lock held): the rows to out, their
  // p^alpha to mass.
  void draw(uint64_t lo, uint64_t hi, size_t k, uint64_t seed, uint64_t stream, int64_t* out,
            float* mass) const;
  // The drawn rows' importance weights from their p^alpha, in place,
  // normalised by the largest.
  void weigh(float* mass, size_t k) const;
  // v^alpha, after refusing v (and a v^alpha a float cannot hold).
  float checked_power(float v, size_t position) const;
  // The tree's shape for `capacity` blocks (at least the rows'), every
  // block sum and every node, from p_.
  void rebuild(uint64_t capacity);
  // Block sums of blocks [first, end) and their ancestors.
  void refresh_blocks(uint64_t first, uint64_t end);
  double block_sum(uint64_t block) const;
  // The sum of p^alpha over rows [first, end), at most a block's.
  double rows_mass(uint64_t first, uint64_t end) const;
  // Where a draw puts its rows' p^alpha: `weights`, or a buffer of k.
  static float* masses_to(float* weights, size_t k);
  // [lo, hi) as pieces in row order.
  void pieces(uint64_t lo, uint64_t hi, std::vector<Piece>& out) const;
  void cover(int level, uint64_t index, uint64_t first, uint64_t end,
             std::vector<Piece>& out) const;
  // Targets t[0, k) (masses, each at least `before`) below node `index` of
  // `level`, whose subtree starts at mass `before`: the rows they fall on,
  // to out[0, k).
  void descend(int level, uint64_t index, double before, const double* t, size_t k,
               int64_t* out, float* mass) const;
  // Node j of level d (0: the root; depth_: the blocks), and the sum of
  // node j's children (recomputed, never adjusted by a difference, so
  // rounding does not accumulate over updates).
  double& node(int d, uint64_t j) { return tree_[level_at_[static_cast<size_t>(d)] + j]; }
  const double& node(int d, uint64_t j) const { return tree_[level_at_[static_cast<size_t>(d)] + j]; }
  double children_sum(int d, uint64_t j) const;
  // Blocks under one node of level d.
  uint64_t span(int d) const { return uint64_t{1} << (3 * (depth_ - d)); }
  // The row of [first, end) that mass `target` (from `first`) falls on: never
  // one without mass (rounding past the end takes the last with some).
  // Its p^alpha to *mass.
  uint64_t find_in_rows(uint64_t first, uint64_t end, double target, float* mass) const;
  // p^alpha of rows [first, first + k), k <= kBlock, to out.
  void powers(uint64_t first, unsigned k, float* out) const;
  // Readers pass the gate before taking the shared lock; a writer holds it
  // while it waits for the exclusive one. A reader first applies the
  // updates left pending.
  std::shared_lock<std::shared_mutex> read_lock() const;
  std::unique_lock<std::shared_mutex> write_lock();
  // Rows idx[0..k) to values (checked already), and their blocks' sums. mu_
  // held exclusively.
  void apply(const int64_t* idx, const float* values, size_t k);
  // The updates left pending, in the order given, mu_ held exclusively:
  // taken from the queue under pending_mu_, applied after it is let go.
  void take_pending();

  // Large arrays on huge pages (base/uninit_vector.hpp): a draw or an
  // update touches rows, blocks and nodes far apart, and at 10^8 rows on
  // 4 KiB pages nearly every one of those is a TLB miss as well.
  template <typename T>
  using Array = std::vector<T, DefaultInitAllocator<T>>;

  double alpha_, beta_;
  Array<float> p_;        // the priorities
  float largest_ = 0;     // see largest()
  uint64_t capacity_ = 1;  // blocks the tree has room for (grown a quarter at a time)
  int depth_ = 0;          // the blocks' level: kFan^depth_ >= capacity_
  // Level d's nodes start at level_at_[d] of tree_ (a multiple of kFan, so
  // that node j's children j * kFan + [0, kFan) share a cache line); level
  // d holds level_nodes_[d] nodes, padded with zeros to a multiple of kFan.
  std::vector<uint64_t> level_at_, level_nodes_;
  Array<double> tree_;
  mutable std::shared_mutex mu_;
  mutable std::mutex gate_;
  // Updates given and not yet applied, to be applied by the next reader or
  // writer (under pending_mu_, which is also held while the row count
  // changes; taken after mu_ where both are waited for).
  std::mutex pending_mu_;
  std::atomic<bool> pending_{false};
  std::vector<int64_t> later_idx_;
  std::vector<float> later_p_;
  // The updates being applied (taken from later_*; under mu_ exclusively).
  std::vector<int64_t> taken_idx_;
  std::vector<float> taken_p_;
};

}  // namespace a2pack::order
