// An order over a dataset that grows while it is read (a live feed): a
// sequence of generations, each the same order made over the rows the
// dataset had when the generation began. Rows appended join an endless
// order (draws with replacement, priorities) at the batch after the feed
// saw them, and an epoch order at the next epoch that has not begun, so a
// batch already begun keeps its rows and the batches before a growth point
// are those the feed would have made without it.
//
// The schedule of generations is part of the state: a state saved over N
// rows and loaded over N + k rows makes the same batches up to its
// position, then takes the k new rows in as a growth at that position.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "order/order.hpp"

namespace a2pack::order {

class LiveOrder final : public Order {
 public:
  // Makes the order over the first `rows` rows of the dataset, with `seed`.
  using Make = std::function<std::shared_ptr<Order>(uint64_t rows, uint64_t seed)>;
  // One generation: from `from` (an epoch, or a batch of an endless order) on,
  // the order over `rows` rows.
  struct Generation {
    uint64_t from = 0, rows = 0;
    std::shared_ptr<Order> order;
  };

  // Over the `rows` rows the dataset has now, from the start.
  LiveOrder(Make make, uint64_t rows, uint64_t seed);

  // A copy in which the rows the dataset holds now (`rows`, more than the
  // last generation's) join from position `at` (the next batch the
  // consumer gets).
  std::unique_ptr<LiveOrder> grown(uint64_t rows, Position at) const;
  uint64_t rows() const { return gens_.back().rows; }
  const std::vector<Generation>& generations() const { return gens_; }

  Kind kind() const override { return gens_.back().order->kind(); }
  std::string describe() const override;
  uint32_t state_flags() const override { return gens_.back().order->state_flags(); }
  uint64_t batches_in(uint64_t epoch) const override;
  uint64_t sequence(Position p) const override;
  size_t max_rows() const override { return max_rows_; }
  size_t max_rows_any() const override { return max_rows_; }
  uint64_t unit_rows() const override { return gens_.back().order->unit_rows(); }
  size_t fill(Position p, Out& out) const override { return at(p).fill(p, out); }
  Residency residency(Position p) const override;
  const Order& maker_of(Position p) const override { return at(p); }
  uint64_t seed() const override { return seed_; }
  void restart(Position p) override;
  void stop() override;
  std::string save_state(Position next) const override;
  std::unique_ptr<Order> load_state(const void* data, size_t len, Position* next) const override;

 private:
  LiveOrder(const LiveOrder&) = default;
  bool endless() const { return endless_; }
  // The generation position p falls in.
  const Order& at(Position p) const;
  uint64_t key(Position p) const { return endless_ ? p.batch : p.epoch; }

  Make make_;
  std::vector<Generation> gens_;
  uint64_t seed_ = 0;
  bool endless_ = false;
  size_t max_rows_ = 0;
};

}  // namespace a2pack::order
