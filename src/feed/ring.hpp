// The feed's ring: a fixed number of equally laid out batch buffers
// ("slots") in one page-aligned mapping, page-locked for CUDA when a runtime
// is found, handed to the consumer with a reference count. The ring's
// memory, lock and free list outlive the feed while the consumer holds
// batches (shared ownership), so a slot can be released after close.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "a2pack.h"
#include "base/fork_stamp.hpp"

namespace a2pack::feed {

class CudaHost;
class Ring;

// One batch buffer; handed out to the C ABI as a2pack_feed_batch*.
struct Slot {
  Ring* ring = nullptr;
  uint8_t* base = nullptr;  // the slot's bytes: columns at Ring::offset(c)
  std::atomic<uint32_t> refs{0};
  // While handed out: the ring, so that it outlives the feed.
  std::shared_ptr<Ring> keep;
  uint64_t epoch = 0, batch = 0, rows = 0, global_rows = 0, sequence = 0;
};

enum class Pin { kAuto, kOff, kOn };

class Ring {
 public:
  // `column_bytes[c]`: room each slot needs for column c (0: not selected).
  Ring(size_t slots, const std::vector<size_t>& column_bytes, Pin pin);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  size_t slot_count() const { return slots_.size(); }
  size_t slot_bytes() const { return slot_bytes_; }
  Slot& slot(size_t i) { return *slots_[i]; }
  size_t offset(size_t column) const { return offsets_[column]; }
  bool has(size_t column) const { return column_bytes_[column] != 0; }
  bool pinned() const { return pinned_; }
  // Why the ring is not pinned (empty when it is, or pinning was off).
  const std::string& pin_note() const { return pin_note_; }

  // Drop one reference to a handed-out slot; the last one returns it to the
  // free list (under mu, waking the producers). Any thread. In a process
  // forked from the ring's owner the slot is left as it is: the lock may be
  // held by a thread that does not exist here.
  static void release(Slot* s);

  // Guarded by mu: the free slots and the count handed out.
  std::mutex mu;
  // A slot came back, or the consumer made room for a batch ahead. Producers
  // also look again on their own (feed/pace.hpp), so it is signalled only
  // when the consumer needs a batch soon: see urgent().
  std::condition_variable freed;
  std::vector<Slot*> free_list;
  uint32_t held = 0;
  // Guarded by mu, kept by the feed: batches filled and not yet taken,
  // whether the consumer is waiting in next(), and whether it takes batches
  // faster than a producer's timed sleep can follow (feed/pace.hpp).
  uint32_t ready = 0;
  bool consumer_waiting = false;
  bool consumer_fast = false;
  // True when a producer should start now rather than at its next look: the
  // consumer is waiting, will be at its next call, or is fast.
  bool urgent() const { return ready == 0 || consumer_waiting || consumer_fast; }
  ForkStamp stamp;
  // The element type of the moves column (set by the feed before any slot
  // is handed out; read by the column views).
  a2pack_feed_dtype moves_dtype = A2PACK_FEED_DTYPE_U8;
  // Rows of one unit of a batch (the order's: 1, or a window's steps): a
  // column's tensor is [rows / unit_rows, unit_rows, ...] when above 1.
  uint64_t unit_rows = 1;

 private:
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<size_t> column_bytes_, offsets_;
  size_t slot_bytes_ = 0, map_bytes_ = 0;
  uint8_t* map_ = nullptr;
  const CudaHost* cuda_ = nullptr;  // set while the mapping is registered
  bool pinned_ = false;
  std::string pin_note_;
};

}  // namespace a2pack::feed
