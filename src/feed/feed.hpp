// The training feed: producer threads walk the epoch sampler's global batch
// sequence (or a mixing sampler's endless one), gather each batch's (rank
// part's) columns into a free ring slot, and the consumer takes the slots
// strictly in sequence order. Uses the dataset only through its public
// interface (Dataset::gather_columns, Sampler, MixSampler).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/fork_stamp.hpp"
#include "dataset/dataset.hpp"
#include "dataset/mix_sampler.hpp"
#include "dataset/sampler.hpp"
#include "feed/pace.hpp"
#include "feed/placement.hpp"
#include "feed/ring.hpp"

namespace a2pack::feed {

// The columns, in the order of a2pack_feed_column.
enum Column : uint32_t {
  kExponents, kMoves, kLegal, kEvValues, kBoards, kRunIds, kStepIndices, kLegalMask, kIndices,
  kColumnCount
};
enum class MovesType { kU8, kI32, kI64 };

struct Options {
  uint64_t batch_size = 4096;
  uint32_t depth = 4;
  uint32_t threads = 1;
  uint32_t slots = 0;  // 0: depth + 2
  uint32_t columns = 0xF;
  MovesType moves = MovesType::kU8;
  uint64_t seed = 0;
  bool shuffle = true;
  // The permutation a shuffled feed walks (dataset/sampler.hpp); a loaded
  // state's kind replaces it.
  dataset::Shuffle shuffle_kind = dataset::Shuffle::kIndex;
  bool drop_last = false;
  uint32_t rank = 0, world = 1;
  uint64_t epochs = 0;  // end before this epoch; 0: never
  uint64_t start_epoch = 0;
  Pin pin = Pin::kAuto;
  bool spare_consumer_cpu = true;  // see feed/placement.hpp
};

struct Stats {
  uint64_t batches_served = 0, rows_served = 0;
  uint64_t consumer_wait_ns = 0, producer_idle_ns = 0, producer_busy_ns = 0;
  uint64_t epoch = 0, next_batch = 0, batches_per_epoch = 0, slot_bytes = 0, seed = 0;
  uint32_t threads = 0, depth = 0, slots = 0, held = 0, ready = 0;
  bool pinned = false;
  int spared_cpu = -1;  // the CPU the producers keep off, or -1
};

class Feed {
 public:
  // `indices` empty and `all_rows`: every row of the dataset.
  Feed(std::shared_ptr<const dataset::Dataset> ds, std::vector<int64_t> indices, bool all_rows,
       const Options& o);
  // Over a mixing sampler (copied) of `ds`'s rows: its global batches from
  // `first_batch` on, without end, in epoch 0. The mix's batch size and seed
  // replace the options'; shuffle, drop_last, epochs and start_epoch do not
  // apply.
  Feed(std::shared_ptr<const dataset::Dataset> ds, const dataset::MixSampler& mix,
       uint64_t first_batch, const Options& o);
  // Stops and joins the producers. Must not run in a forked child (the
  // threads are not there to join): the C ABI leaks the feed there instead.
  ~Feed();
  Feed(const Feed&) = delete;
  Feed& operator=(const Feed&) = delete;

  // The next slot (one reference held), or null at the end (*ended) or when
  // `timeout` ran out. timeout < 0: wait as long as it takes.
  Slot* next(std::chrono::milliseconds timeout, bool* ended);
  // Take back the batch next() handed out last, which the consumer never
  // passed on (it was interrupted), with the consumer's one reference:
  // the next next() hands out the same slot again, and until then the
  // state and stats count it as not taken. INVALID_ARGUMENT, changing
  // nothing, for another slot (or one taken before the last restart), one
  // retained elsewhere, or when one is given back already.
  void put_back(Slot* s);
  Stats stats() const;
  std::string save_state() const;
  void load_state(const void* data, size_t len);
  // A feed over a mix: mix with `weights` from the batch next() hands out
  // next on; batches filled ahead are made again. INVALID_ARGUMENT for a
  // feed over an epoch sampler or weights the mix refuses (no change).
  void set_weights(const std::vector<double>& weights);
  bool mixing() const { return mix_ != nullptr; }
  const ForkStamp& stamp() const { return stamp_; }
  const Ring& ring() const { return *ring_; }

 private:
  // Where ticket t (counted from the last (re)start) lies.
  struct Position {
    uint64_t epoch, batch;
  };
  Position position(uint64_t ticket) const;
  void check_options();               // rank, world, threads, slots
  void make_ring(uint64_t batch_len);  // the ring for parts of batches of batch_len rows
  // Set the order to start at (epoch, batch) and start the producers.
  void begin(uint64_t epoch, uint64_t batch, std::shared_ptr<const dataset::Sampler> s);
  // A feed over a mix: `change` alters a copy of the mix and returns the
  // batch to go on from; then the producers stop, the copy replaces the mix
  // and they restart there.
  void change_mix(const std::function<uint64_t(dataset::MixSampler&)>& change);
  std::shared_ptr<const dataset::Sampler> sampler_for(uint64_t epoch);
  // Gather ticket t into slot s (any thread; uses `workers` gather threads).
  void fill(Slot* s, uint64_t ticket, uint32_t workers);
  void produce(unsigned thread);
  void start();
  void stop();  // sets stop_, joins; mu must not be held
  // Reset the order to start at (epoch, batch) with `sampler` for that
  // epoch; the producers must be stopped.
  void restart_at(uint64_t epoch, uint64_t batch, std::shared_ptr<const dataset::Sampler> s);
  Slot* hand_out(Slot* s);  // mu held

  std::shared_ptr<const dataset::Dataset> ds_;
  bool all_rows_;
  Options o_;
  // The template the epochs' samplers are copied from: the selection, seed
  // and batches, no permutation (null over a mix).
  std::unique_ptr<dataset::Sampler> base_;
  // Over a mix: the order, with its own lock (fill_part uses scratch space).
  std::unique_ptr<dataset::MixSampler> mix_;
  mutable std::mutex mix_mu_;
  uint64_t batch_count_ = 0;
  size_t part_max_ = 0;  // most rows of a rank's part
  uint32_t rows_crc_ = 0;
  std::shared_ptr<Ring> ring_;
  ForkStamp stamp_;

  // The epochs' samplers (the newest few), guarded by epoch_mu_. An epoch's
  // permutation is O(n) to make, so the next epoch's is made ahead on a
  // helper thread (prep_) while the current one is fed.
  std::mutex epoch_mu_;
  std::condition_variable epoch_cv_;  // an epoch's sampler was made (or failed)
  std::vector<std::shared_ptr<const dataset::Sampler>> epochs_;
  std::vector<uint64_t> building_;  // epochs being made
  std::thread prep_;
  bool prep_done_ = true;
  std::shared_ptr<const dataset::Sampler> make_epoch(uint64_t epoch) const;
  void prepare(uint64_t epoch, std::unique_lock<std::mutex>& lk);  // epoch_mu_ held
  void add_epoch(std::shared_ptr<const dataset::Sampler> s);       // epoch_mu_ held
  void keep_epochs_up_to(uint64_t newest);                         // epoch_mu_ held
  void join_prep();

  // The order, guarded by ring_->mu.
  uint64_t start_epoch_ = 0, start_batch_ = 0;  // the position of ticket 0
  uint64_t total_ = 0;      // tickets until the end (UINT64_MAX: never ends)
  uint64_t issued_ = 0;     // tickets producers took
  uint64_t consumed_ = 0;   // tickets handed to the consumer
  std::vector<Slot*> ready_;  // ticket t's slot at t % depth once filled
  Slot* last_ = nullptr;      // the slot handed out last, while put_back() may take it
  Slot* returned_ = nullptr;  // a slot put back: next() hands it out before anything else
  bool stop_ = false;
  std::exception_ptr error_;
  uint64_t error_ticket_ = 0;
  bool failed_ = false;
  std::condition_variable filled_;  // a slot became ready (or an error)
  Pace pace_;                        // the consumer's takes, for idle producers
  std::atomic<uint64_t> fills_{0};  // counts filled_ events, for polling without the lock
  // The sampler and position after the last batch handed out (the state).
  std::shared_ptr<const dataset::Sampler> state_sampler_;
  uint64_t state_next_ = 0;
  std::vector<std::thread> threads_;
  Placement placement_;  // where the producers may run

  // The consumer's counters and the producers' on cache lines of their own:
  // a line both sides write moves between CPUs at every batch, and the
  // consumer's next() then waits for it.
  alignas(64) std::atomic<uint64_t> served_{0}, rows_served_{0}, wait_ns_{0};
  alignas(64) std::atomic<uint64_t> idle_ns_{0}, busy_ns_{0};
};

}  // namespace a2pack::feed
