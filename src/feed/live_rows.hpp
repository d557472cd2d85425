// Following a dataset that another process appends to. The consumer asks
// before each batch (poll: one stat of manifest.json, O(1)); when the
// manifest changed - an append commits by renaming a new one into place -
// a helper thread reads the committed rows again (only those, so nothing
// torn or half-written is ever read), checks that the rows the feed has
// read are still its first rows, and hands the grown rows to the next
// poll. The feed then takes the new rows in (order/live_order.hpp).
//
// A single-file dataset is opened again (a new Dataset over the grown
// steps.npy); a sharded dataset's cache takes in the shards the append
// added (dataset/shard_cache.hpp, grow()), the shards it holds staying
// resident.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "dataset/dataset.hpp"
#include "dataset/shard_cache.hpp"

namespace a2pack::feed {

class LiveRows {
 public:
  struct Grown {
    uint64_t rows = 0;
    std::shared_ptr<const dataset::Dataset> ds;  // a single-file dataset, opened again
    dataset::Ranges runs;  // the runs of ds in row order (when asked for)
  };
  // Follows `ds`'s folder, opening it again with `reopen`; with `runs` each
  // grown dataset comes with its runs' table (one query of metadata.db).
  static std::unique_ptr<LiveRows> of_dataset(std::shared_ptr<const dataset::Dataset> ds,
                                              const dataset::OpenOptions& reopen, bool runs);
  // Follows the sharded dataset `shards` reads, growing it in place; new
  // shards must fit windows of `window` shards in its budget.
  static std::unique_ptr<LiveRows> of_shards(std::shared_ptr<dataset::ShardCache> shards,
                                             uint32_t window);
  ~LiveRows();  // waits for a read under way
  LiveRows(const LiveRows&) = delete;
  LiveRows& operator=(const LiveRows&) = delete;

  // The grown rows when a read finished with more rows than the last one
  // handed out. Rethrows what went wrong in a read (the dataset replaced
  // by a smaller one or by other rows, damaged, removed), once.
  // The consumer's thread; O(1) unless a read has finished.
  std::optional<Grown> poll();
  // Look at the manifest now and wait for the read it calls for (or one
  // under way) to finish, so that the next poll() has its result.
  void settle();

 private:
  // Reads the committed rows again (on the helper thread, one read at a
  // time): the grown rows, nothing when no row was added, or a throw.
  using Read = std::function<std::optional<Grown>()>;
  LiveRows(std::string dir, Read read);

  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t size = -1, mtime_ns = 0;
    bool operator!=(const Stamp& o) const {
      return dev != o.dev || ino != o.ino || size != o.size || mtime_ns != o.mtime_ns;
    }
  };
  Stamp stamp() const;
  void read_again();  // on the helper thread

  std::string dir_, manifest_;
  Read read_;
  Stamp seen_;
  std::thread helper_;
  std::atomic<bool> busy_{false};
  std::mutex mu_;  // guards done_ and error_
  std::optional<Grown> done_;
  std::exception_ptr error_;
};

}  // namespace a2pack::feed
