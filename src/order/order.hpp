// The sampling orders a feed walks. An order says which dataset rows make
// up each batch of its sequence and nothing else: the feed's ring,
// producers, pacing and pinning (src/feed) know no order, and an order knows
// no ring. Every order is a pure function of its settings and its position,
// so any batch can be filled on any thread, in any order, and again after a
// restart; its checkpoint is its settings' fingerprint and a position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace a2pack::order {

// A place in an order's sequence: batch `batch` of epoch `epoch`.
struct Position {
  uint64_t epoch = 0, batch = 0;
  bool operator==(const Position& o) const { return epoch == o.epoch && batch == o.batch; }
};

// Global rows [first, first + count).
struct RowSpan {
  uint64_t first = 0, count = 0;
};

// What a batch's rows are about to need: the spans it reads now and those
// the batches after it read next (a source that keeps part of the rows in
// memory loads `next` ahead and keeps `now`).
struct Residency {
  std::vector<RowSpan> now, next;
};

// The kinds of order, as a feed's checkpoint names them (each a bit of its
// flags, so a state of one kind is refused by a feed of another).
enum class Kind : uint32_t {
  kEpoch = 1,   // epochs of a selection, shuffled or in order
  kMix = 2,     // a mixing sampler's weighted endless sequence
  kBlocks = 4,  // a sharded dataset's block shuffle
  kReplay = 8,  // windows, draws with replacement, recency (order/replay_order.hpp)
};

// Where fill() writes a batch: the dataset rows, and per row the columns
// an order may have to say something about (null when not asked for; the
// feed fills them with 1 beforehand, so an order writes them only where it
// has something else to say).
struct Out {
  int64_t* indices = nullptr;  // max_rows() values
  uint8_t* valid = nullptr;    // 1 a real step, 0 padding (windows of short runs)
  float* weights = nullptr;    // importance weights (prioritized orders)
  uint64_t global_rows = 0;    // set by fill(): rows of the whole global batch
};

class Order {
 public:
  static constexpr uint64_t kEndless = UINT64_MAX;

  virtual ~Order() = default;
  virtual Kind kind() const = 0;
  // The order in words, for errors ("an epoch sampler", "a mixing sampler", ...).
  virtual std::string describe() const = 0;
  // Bits a checkpoint keeps beside the kind (an epoch order: whether it
  // shuffles), refused when they differ at load.
  virtual uint32_t state_flags() const { return 0; }
  // Batches of epoch e; kEndless for an order of one endless epoch.
  virtual uint64_t batches_in(uint64_t epoch) const = 0;
  // Batches before position p, counted from the start (the batch's place in
  // the order's whole sequence).
  virtual uint64_t sequence(Position p) const = 0;
  // The most rows fill() writes for one batch.
  virtual size_t max_rows() const = 0;
  // Rows of one unit of a batch: 1, or the steps of a window (a batch's
  // rows are its units' one after another).
  virtual uint64_t unit_rows() const { return 1; }
  // The most it writes over any number of rows (a live feed's ring is made
  // for the dataset it grows into).
  virtual size_t max_rows_any() const { return max_rows(); }
  // Write this rank's rows of batch p to `out` (at most max_rows()); returns
  // how many, and the rows of the whole global batch in out.global_rows.
  // Thread-safe: producers fill different batches at once.
  virtual size_t fill(Position p, Out& out) const = 0;
  // The rows batch p and its successors read (empty: the order reads the
  // whole dataset at random and has nothing to say).
  virtual Residency residency(Position) const { return {}; }
  // The order that makes batch p: itself, or the generation of a live
  // order (order/live_order.hpp) that p falls in.
  virtual const Order& maker_of(Position) const { return *this; }
  virtual uint64_t seed() const = 0;

  // Producers start (or restart) at p: an order that makes anything ahead
  // (an epoch's stored permutation) starts there.
  virtual void restart(Position) {}
  // Stop whatever the order runs in the background (before it is destroyed
  // or replaced).
  virtual void stop() {}
  // How a helper thread of the order enters its life (the feed's CPU
  // placement); called on that thread.
  void set_helper_entry(std::function<void()> f) { helper_entry_ = std::move(f); }

  // Checkpoint: the order's own state for the position `next`.
  virtual std::string save_state(Position next) const = 0;
  // A copy that adopts `state` (seed, weights, ...) and the position it
  // names; throws, changing nothing, for a state it refuses.
  virtual std::unique_ptr<Order> load_state(const void* data, size_t len,
                                            Position* next) const = 0;

 protected:
  std::function<void()> helper_entry_;
};

}  // namespace a2pack::order
