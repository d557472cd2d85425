// The training feed: producer threads walk an order's batch sequence
// (order/order.hpp), gather each batch's (rank part's) columns into a free
// ring slot, and the consumer takes the slots strictly in sequence order.
// The feed knows no order: every sampling order (epochs, a mix, a sharded
// dataset's block shuffle) is an order::Order, and the rows come through
// feed/rows.hpp from a dataset or a sharded dataset's resident shards.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "a2pack.h"
#include "base/fork_stamp.hpp"
#include "dataset/dataset.hpp"
#include "dataset/mix_sampler.hpp"
#include "dataset/sampler.hpp"
#include "dataset/shard_cache.hpp"
#include "feed/live_rows.hpp"
#include "feed/pace.hpp"
#include "feed/placement.hpp"
#include "feed/ring.hpp"
#include "feed/rows.hpp"
#include "order/order.hpp"
#include "order/replay_order.hpp"

namespace a2pack::feed {

// The columns, in the order of a2pack_feed_column.
enum Column : uint32_t {
  kExponents, kMoves, kLegal, kEvValues, kBoards, kRunIds, kStepIndices, kLegalMask, kIndices,
  kValid, kWeights, kColumnCount
};
enum class MovesType { kU8, kI32, kI64 };
// Bytes per row of column c (the moves column: by its type), from the
// column table (feed/columns.hpp).
size_t row_bytes(uint32_t c, MovesType moves);
// The element type of the moves column a feed of `moves` writes.
a2pack_feed_dtype moves_dtype(MovesType moves);

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
  // Follow appends to the dataset (feed/live_rows.hpp, order/live_order.hpp):
  // epoch orders over every row and the replay orders.
  bool live = false;
  // Rate limiting (live feeds): a batch waits until the dataset holds
  // min_size rows and the units served before it are fewer than
  // samples_per_insert * (rows - min_size + 1); after rate_timeout_ms
  // (< 0: never) FULL, naming the limit. 0: no limit.
  double samples_per_insert = 0;
  uint64_t min_size = 0;
  int64_t rate_timeout_ms = 60000;
};

// A sharded dataset read within a memory budget (dataset/shard_cache.hpp).
struct ShardOptions {
  uint64_t budget_bytes = uint64_t{1} << 30;
  uint32_t window = 0;  // shards per window; 0: as many as half the budget holds
  bool verify_crc = true;
  bool huge_pages = true;
  bool prefetch = true;  // load the next window's shards on a background thread
};

// A feed over a sharded dataset: its shards, what this rank reads in one
// epoch, and the resident shards' counters.
struct ShardsInfo {
  dataset::Manifest manifest;
  uint64_t max_shard_bytes = 0;
  uint32_t window_shards = 0;
  uint64_t batches = 0;                      // in the epoch asked for
  uint64_t rank_shards = 0, rank_rows = 0;  // this rank's, in the epoch asked for
  dataset::ShardCacheStats cache;
};

struct Stats {
  uint64_t batches_served = 0, rows_served = 0;
  uint64_t consumer_wait_ns = 0, producer_idle_ns = 0, producer_busy_ns = 0;
  uint64_t epoch = 0, next_batch = 0, batches_per_epoch = 0, slot_bytes = 0, seed = 0;
  uint32_t threads = 0, depth = 0, slots = 0, held = 0, ready = 0;
  bool pinned = false;
  int spared_cpu = -1;  // the CPU the producers keep off, or -1
};

// What a live feed's orders are made again from as the dataset grows.
struct LiveTables {
  std::mutex mu;
  dataset::Ranges runs;  // the dataset's runs (window orders)
  std::shared_ptr<order::Priorities> priorities;  // grown with the rows (prioritized orders)
  // The runs that end within the first `rows` rows.
  dataset::Ranges runs_within(uint64_t rows);
};

class Feed {
 public:
  // Any order over any rows, from position `first` (o's order settings -
  // batch_size, seed, shuffle, drop_last - are the order's business and
  // not read here; rank and world are, for the checks).
  Feed(std::shared_ptr<const Rows> rows, std::unique_ptr<order::Order> order,
       order::Position first, const Options& o);
  // Epochs of `ds`'s rows `indices`, or every row when `all_rows`.
  Feed(std::shared_ptr<const dataset::Dataset> ds, std::vector<int64_t> indices, bool all_rows,
       const Options& o);
  // Over a mixing sampler (copied) of `ds`'s rows: its global batches from
  // `first_batch` on, without end, in epoch 0. The mix's batch size and seed
  // replace the options'; shuffle, drop_last, epochs and start_epoch do not
  // apply.
  Feed(std::shared_ptr<const dataset::Dataset> ds, const dataset::MixSampler& mix,
       uint64_t first_batch, const Options& o);
  // A sharded dataset's block shuffle, its shards resident within a
  // budget: o.batch_size is the global batch, each of o.world ranks taking
  // batch_size / world rows of its own shards (batch_size must divide).
  static std::unique_ptr<Feed> over_shards(const std::string& dir, const ShardOptions& so,
                                           const Options& o);
  // The replay orders of `ds`'s runs (order/replay_order.hpp). The options'
  // batch_size counts units (rows or windows), with seed, shuffle,
  // drop_last, rank and world; ro's own batch_size, seed, shuffle,
  // drop_last, rank and world are replaced by them.
  static std::unique_ptr<Feed> over_replay(std::shared_ptr<const dataset::Dataset> ds,
                                           order::ReplayOrder::Options ro, const Options& o);
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
  // feed over another order or weights the mix refuses (no change).
  void set_weights(const std::vector<double>& weights);
  // A live feed: take in what was committed until now (waiting for the
  // folder to be opened again); the rows the feed reads.
  uint64_t refresh();
  // This rank's rows of batch p (nothing gathered): at most
  // order().max_rows(), 0 past the batches of p's epoch. The consumer's
  // thread, as next().
  size_t batch_indices(order::Position p, int64_t* out) const;
  // Hand out batch p next (an epoch's first batch, or any other): batches
  // filled ahead are dropped, batches the consumer holds stay valid.
  // INVALID_ARGUMENT past the epoch's batches or the feed's last epoch.
  void seek(order::Position p);
  // A feed over a sharded dataset (over_shards): its shards, and this
  // rank's in `epoch`; INVALID_ARGUMENT for a feed over other rows.
  ShardsInfo shards_info(uint64_t epoch) const;
  const order::Order& order() const { return *order_; }
  const ForkStamp& stamp() const { return stamp_; }
  const Ring& ring() const { return *ring_; }

 private:
  void check_forked() const;
  void check_options();               // rank, world, threads, slots
  void make_ring(size_t part_rows);   // the ring for parts of up to part_rows rows
  // Replace the order (when `next` is given) and start the producers at p.
  void begin(order::Position p);
  // Stop the producers, put `o` in place of the order (and `rows` in place
  // of the rows, when given) and restart at p.
  void replace_order(std::unique_ptr<order::Order> o, order::Position p,
                     std::shared_ptr<const Rows> rows = nullptr);
  // A live feed: take in the rows an append added, if one committed
  // (feed/live_rows.hpp); the consumer's thread, before a batch.
  void follow_growth();
  // Rate limiting: wait until the actors have appended enough for the
  // batch at the feed's position: false when `timeout` (< 0: none) ran out
  // first; FULL when the limit's own timeout has, counted from the first
  // call that waited for this batch.
  bool wait_for_inserts(std::chrono::milliseconds timeout);
  // The position after p, skipping empty epochs; false when the feed ends
  // before it (the epochs limit).
  bool advance(order::Position* p) const;
  bool past_end(const order::Position& p) const {
    return o_.epochs != 0 && p.epoch >= o_.epochs;
  }
  order::Position normalized(order::Position p) const;
  // Gather position p into slot s (any thread; uses `workers` gather threads).
  void fill(Slot* s, order::Position p, uint64_t sequence, uint32_t workers);
  void produce(unsigned thread);
  // Take the next ticket's position (ring mu held): false at the end.
  bool take_ticket(uint64_t* ticket, order::Position* p);
  void start();
  void stop();  // sets stop_, joins; mu must not be held
  // Reset the order's position to p; the producers must be stopped.
  void restart_at(order::Position p);
  Slot* hand_out(Slot* s);  // mu held

  std::shared_ptr<const Rows> rows_;
  std::shared_ptr<const dataset::ShardCache> shards_;  // a feed over a sharded dataset's
  Options o_;
  // A live feed's watcher, the runs' table its window orders are made
  // over, and the priorities that grow with it (null otherwise).
  std::unique_ptr<LiveRows> live_;
  std::optional<std::chrono::steady_clock::time_point> rate_wait_since_;
  std::shared_ptr<LiveTables> live_tables_;
  std::unique_ptr<order::Order> order_;
  size_t part_max_ = 0;  // most rows of a rank's part
  std::shared_ptr<Ring> ring_;
  ForkStamp stamp_;

  // The order's position, guarded by ring_->mu.
  order::Position issue_pos_;  // of the next ticket a producer takes
  bool exhausted_ = false;     // no ticket after those issued
  uint64_t seq_base_ = 0;      // the sequence number of ticket 0
  uint64_t issued_ = 0;        // tickets producers took
  uint64_t consumed_ = 0;      // tickets handed to the consumer
  std::vector<Slot*> ready_;   // ticket t's slot at t % depth once filled
  Slot* last_ = nullptr;       // the slot handed out last, while put_back() may take it
  Slot* returned_ = nullptr;   // a slot put back: next() hands it out before anything else
  bool stop_ = false;
  std::exception_ptr error_;
  uint64_t error_ticket_ = 0;
  bool failed_ = false;
  std::condition_variable filled_;  // a slot became ready (or an error)
  Pace pace_;                        // the consumer's takes, for idle producers
  std::atomic<uint64_t> fills_{0};  // counts filled_ events, for polling without the lock
  // The position after the last batch handed out (the state's), and of the
  // batch the consumer gets next (the stats').
  order::Position state_next_;
  std::vector<std::thread> threads_;
  Placement placement_;  // where the producers may run
  bool poll_ = true;     // next() may poll for a batch being gathered (Feed::start)

  // The consumer's counters and the producers' on cache lines of their own:
  // a line both sides write moves between CPUs at every batch, and the
  // consumer's next() then waits for it.
  alignas(64) std::atomic<uint64_t> served_{0}, rows_served_{0}, wait_ns_{0};
  alignas(64) std::atomic<uint64_t> idle_ns_{0}, busy_ns_{0};
};

}  // namespace a2pack::feed
