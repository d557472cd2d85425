// Where a feed's rows come from: an open dataset (every row in RAM or
// mapped) or a sharded dataset's shards within a memory budget. The feed
// gathers a batch's rows through this and tells it what the order reads
// next; it knows nothing else of either.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dataset/columns.hpp"
#include "dataset/dataset.hpp"
#include "dataset/shard_cache.hpp"
#include "order/order.hpp"

namespace a2pack::feed {

class Rows {
 public:
  virtual ~Rows() = default;
  virtual uint64_t rows() const = 0;
  virtual const std::string& dir() const = 0;
  // The rows' manifest CRC32C (0 without a manifest): a checkpoint's check
  // that it is loaded over the same rows.
  virtual uint32_t rows_crc() const = 0;
  // The CRC32C of the first n rows (a live feed's state names the rows it
  // had read: a prefix of the rows now). O(n) unless n is every row.
  virtual uint32_t prefix_crc(uint64_t n) const = 0;
  // Copy rows idx[0..n) to `out`'s columns (OUT_OF_RANGE before anything
  // is written for an index outside). Thread-safe.
  virtual void gather(const int64_t* idx, size_t n, const dataset::ColumnsOut& out,
                      uint32_t workers) const = 0;
  // What the order reads now and next (see order::Residency).
  virtual void want(const order::Residency&) const {}
};

std::shared_ptr<const Rows> dataset_rows(std::shared_ptr<const dataset::Dataset> ds);
std::shared_ptr<const Rows> shard_rows(std::shared_ptr<const dataset::ShardCache> shards);

}  // namespace a2pack::feed
