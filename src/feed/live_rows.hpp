// Following a dataset that another process appends to. The consumer asks
// before each batch (poll: one stat of manifest.json, O(1)); when the
// manifest changed - an append commits by renaming a new one into place -
// a helper thread opens the folder again (the committed rows only, so
// nothing torn or half-written is ever read), checks that the rows the
// feed has read are still its first rows, and hands the grown dataset to
// the next poll. The feed then takes the new rows in (order/live_order.hpp).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "dataset/dataset.hpp"

namespace a2pack::feed {

class LiveRows {
 public:
  struct Grown {
    std::shared_ptr<const dataset::Dataset> ds;
    dataset::Ranges runs;  // the runs of ds in row order (when asked for)
  };
  // Follows `ds`'s folder, opening it again with `reopen`; with `runs` each
  // grown dataset comes with its runs' table (one query of metadata.db).
  LiveRows(std::shared_ptr<const dataset::Dataset> ds, const dataset::OpenOptions& reopen,
           bool runs);
  ~LiveRows();  // waits for an open under way
  LiveRows(const LiveRows&) = delete;
  LiveRows& operator=(const LiveRows&) = delete;

  // The grown dataset when an open finished with more rows than the last
  // one handed out. Rethrows what went wrong in an open (the dataset
  // replaced by a smaller one or by other rows, damaged, removed), once.
  // The consumer's thread; O(1) unless an open has finished.
  std::optional<Grown> poll();
  // Look at the manifest now and wait for the open it calls for (or one
  // under way) to finish, so that the next poll() has its result.
  void settle();

 private:
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t size = -1, mtime_ns = 0;
    bool operator!=(const Stamp& o) const {
      return dev != o.dev || ino != o.ino || size != o.size || mtime_ns != o.mtime_ns;
    }
  };
  Stamp stamp() const;
  void open_again();  // on the helper thread

  std::string dir_, manifest_;
  dataset::OpenOptions reopen_;
  bool runs_;
  std::shared_ptr<const dataset::Dataset> last_;  // the rows the feed reads
  Stamp seen_;
  std::thread helper_;
  std::atomic<bool> busy_{false};
  std::mutex mu_;  // guards done_ and error_
  std::optional<Grown> done_;
  std::exception_ptr error_;
};

}  // namespace a2pack::feed
