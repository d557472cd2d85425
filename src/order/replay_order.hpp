// The replay orders of a reinforcement-learning learner, over a dataset's
// runs: single rows or windows of `window` consecutive steps of one run
// (never across a run's end), each epoch every unit once (shuffled by
// (seed, epoch) with the index shuffle, or in order), or endlessly drawn
// uniformly with replacement; restricted to the newest `recent` rows when
// asked. A unit is a row, or a window's start: with stride 1 every step a
// window fits after, with stride `window` the run's non-overlapping tiles
// (a tail shorter than a window left out). A run shorter than a window is
// left out, or with pad_short gives one window of its steps, padded by
// repeating its last step, the padding marked in the valid column.
//
// With priorities (order/priorities.hpp) rows are drawn endlessly with
// probability p^alpha from the rows the order reads, each batch stratified
// and deterministic in (seed, batch) and the priorities when it is filled:
// a batch filled ahead has the priorities of that moment (at most the
// feed's depth of batches old).
//
// Batches count units: a batch of B windows is B * window rows, rank r of
// `world` taking its contiguous part of the B units. Nothing is stored per
// row: the units are the runs' table (one entry per run) and the shuffle is
// stateless, so the order adds O(runs) memory at any row count.
#pragma once

#include <memory>

#include "dataset/dataset.hpp"
#include "order/order.hpp"
#include "order/priorities.hpp"

namespace a2pack::order {

class ReplayOrder final : public Order {
 public:
  struct Options {
    uint64_t batch_size = 4096;  // units per global batch
    uint64_t seed = 0;
    bool shuffle = true;      // epochs: shuffled (else in order)
    bool drop_last = false;   // epochs: leave out a short last batch
    uint32_t rank = 0, world = 1;
    uint64_t window = 1;      // steps per unit
    uint64_t stride = 1;      // 1, or `window` (tiles)
    bool pad_short = false;
    bool replacement = false;  // endless uniform draws
    uint64_t recent = 0;       // 0: every row; K: the newest K rows only
    // Rows drawn with probability p^alpha (endless, with replacement), and
    // their importance weights in the weights column; one priority per row
    // of the dataset (or more: a live feed's grow ahead of its orders).
    // Shared: the learner updates it while producers draw.
    std::shared_ptr<Priorities> priorities;
  };
  // `runs`: the dataset's runs in row order (each run's rows); `rows`: its
  // row count. Fails, naming the value, for a window of 0, a stride other
  // than 1 or the window, a batch size of 0, or no unit at all (a window
  // longer than every run, without pad_short).
  ReplayOrder(const dataset::Ranges& runs, uint64_t rows, const Options& o);

  Kind kind() const override { return Kind::kReplay; }
  std::string describe() const override;
  uint32_t state_flags() const override { return 0; }
  uint64_t batches_in(uint64_t) const override { return o_.replacement ? kEndless : batch_count_; }
  uint64_t sequence(Position p) const override {
    return o_.replacement ? p.batch : p.epoch * batch_count_ + p.batch;
  }
  size_t max_rows() const override;
  uint64_t unit_rows() const override { return o_.window; }
  size_t max_rows_any() const override {
    return static_cast<size_t>((o_.batch_size + o_.world - 1) / o_.world * o_.window);
  }
  size_t fill(Position p, Out& out) const override;
  uint64_t seed() const override { return o_.seed; }
  std::string save_state(Position next) const override;
  std::unique_ptr<Order> load_state(const void* data, size_t len, Position* next) const override;

  uint64_t units() const { return units_; }
  // Unit u's first row and its real steps (window, or fewer when padded).
  void unit(uint64_t u, uint64_t* first, uint64_t* steps) const;

 private:
  // Per run kept: its first row (after the recency cut), its units and
  // the units before it.
  struct RunUnits {
    uint64_t first, rows, units_before;
  };
  uint64_t units_of(uint64_t rows) const;
  uint32_t flags() const;  // the state's
  // The unit that starts at `row` (its first row and real steps); false
  // for a row that starts none.
  bool start_unit(uint64_t row, uint64_t* first, uint64_t* steps) const;
  // Prioritized windows: replace the drawn rows[0..len) that start no
  // window by new draws, then set the weights of the starts.
  void draw_starts(uint64_t batch, int64_t* rows, float* w, size_t len) const;
  // Write units [a, b) of batch (epoch, batch)'s order to out.
  void batch_units(Position p, size_t a, size_t b, uint64_t* out) const;

  Options o_;
  uint64_t rows_ = 0, first_row_ = 0;  // the dataset's rows, the first the order reads
  std::vector<RunUnits> runs_;
  uint64_t units_ = 0, batch_count_ = 0, table_hash_ = 0;
};

}  // namespace a2pack::order
