#include "feed/feed.hpp"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <utility>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/spin.hpp"
#include "feed/columns.hpp"
#include "order/block_order.hpp"
#include "order/epoch_order.hpp"
#include "order/live_order.hpp"
#include "order/mix_order.hpp"

namespace a2pack::feed {

using order::Position;

namespace {

using Clock = std::chrono::steady_clock;
// How long next() polls for a batch being gathered before it sleeps.
constexpr int kSpinMicros = 100;
// Empty epochs skipped in a row before the feed gives up looking for a
// batch (a sharded deal can leave an epoch without a whole batch).
constexpr int kMaxEmptyEpochs = 64;
uint64_t ns_since(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// The feed's checkpoint: its own header around the order's state.
//   "A2FS" · u32 version · u32 flags · u32 rows CRC32C · u64 dataset rows ·
//   u32 order state length · order state · u32 CRC32C
// of everything before it. Flags: bit 0 an epoch order that shuffles, bit 1
// a mixing order, bit 2 a sharded dataset's block order, bit 3 a replay
// order (windows, draws with replacement, recency), bit 4 a live feed (the
// order's state is order/live_order.hpp's, the rows those it had read: a
// prefix of the dataset's now). The dataset's row
// count and manifest CRC refuse a state taken over another dataset (the
// order's own hash covers the selection, not the rows' contents).
constexpr char kMagic[4] = {'A', '2', 'F', 'S'};
// A shard stream's state: its block order's (dataset/block_sampler.cpp).
constexpr char kShardStreamMagic[4] = {'A', '2', 'B', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 4 + 4 + 4 + 4 + 8 + 4;
constexpr uint32_t kFlagShuffle = 1, kFlagMix = 2, kFlagBlocks = 4, kFlagReplay = 8,
                   kFlagLive = 16;
constexpr uint32_t kKnownFlags = kFlagShuffle | kFlagMix | kFlagBlocks | kFlagReplay | kFlagLive;

uint32_t state_flags(const order::Order& o) {
  switch (o.kind()) {
    case order::Kind::kMix: return kFlagMix;
    case order::Kind::kBlocks: return kFlagBlocks;
    case order::Kind::kReplay: return kFlagReplay;
    case order::Kind::kEpoch: break;
  }
  return o.state_flags() & kFlagShuffle;
}
const char* kind_words(uint32_t flags) {
  return flags & kFlagMix      ? "a mixing sampler"
         : flags & kFlagBlocks  ? "a block shuffle of shards"
         : flags & kFlagReplay  ? "a replay order (windows, draws with replacement, recency)"
                                : "an epoch sampler";
}

// The options' own checks, before any order is made.
Options checked(Options o) {
  if (o.batch_size == 0) fail(A2PACK_E_INVALID_ARGUMENT, "feed: batch_size must be at least 1");
  if (o.world == 0 || o.rank >= o.world)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed: rank {} of a world of {}: expected 0 <= rank < world",
         o.rank, o.world);
  if (o.samples_per_insert > 0 && !o.live)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: a rate limit waits for rows to be appended: open the feed with live");
  if (o.threads == 0) o.threads = 1;
  if (o.slots == 0) o.slots = o.depth + 2;
  if (o.slots < o.depth + 1 || o.slots < 1)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: {} slots for a depth of {}: the ring needs at least depth + 1 slots (one for "
         "the consumer)",
         o.slots, o.depth);
  return o;
}

std::unique_ptr<order::Order> epoch_order(const dataset::Dataset& ds, std::vector<int64_t> indices,
                                          bool all_rows, const Options& o_in) {
  const Options o = checked(o_in);
  const uint64_t rows = ds.rows();
  const uint64_t n = all_rows ? rows : indices.size();
  if (n == 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed: {}: the selection is empty ({} rows in the dataset)",
         ds.dir(), rows);
  if (!all_rows) {
    for (size_t i = 0; i < indices.size(); ++i)
      if (indices[i] < 0 || static_cast<uint64_t>(indices[i]) >= rows)
        fail(A2PACK_E_OUT_OF_RANGE, "feed: {}: index {} (position {} of the selection) is "
             "outside the {} rows", ds.dir(), indices[i], i, rows);
  }
  order::EpochOrder::Options eo;
  eo.batch_size = o.batch_size;
  eo.seed = o.seed;
  eo.shuffle = o.shuffle;
  eo.shuffle_kind = o.shuffle_kind;
  eo.drop_last = o.drop_last;
  eo.rank = o.rank;
  eo.world = o.world;
  if (o.live) {
    if (!all_rows)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "feed: {}: live follows every row of a growing dataset; a selection of {} rows does "
           "not grow (open the feed over the whole dataset)",
           ds.dir(), indices.size());
    if (o.shuffle && o.shuffle_kind == dataset::Shuffle::kStored)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "feed: {}: live takes the index shuffle or no shuffle; a stored permutation is made "
           "for one row count",
           ds.dir());
    const uint64_t epochs = o.epochs;
    return std::make_unique<order::LiveOrder>(
        [eo, epochs](uint64_t n, uint64_t seed) {
          auto e = eo;
          e.seed = seed;
          auto ord = std::make_shared<order::EpochOrder>(std::vector<int64_t>{}, true, n, e);
          ord->set_epoch_limit(epochs);
          return ord;
        },
        rows, o.seed);
  }
  auto ord = std::make_unique<order::EpochOrder>(std::move(indices), all_rows, rows, eo);
  ord->set_epoch_limit(o.epochs);
  return ord;
}

dataset::OpenOptions reopen_options(const dataset::Dataset& ds) {
  dataset::OpenOptions oo;
  oo.mmap = ds.mapped();
  oo.huge_pages = ds.huge_pages();
  oo.verify_crc = true;
  return oo;
}

Options mix_options(const dataset::MixSampler& mix, Options o) {
  o.batch_size = mix.batch_size();
  o.seed = mix.seed();
  o.shuffle = true;
  o.drop_last = false;
  o.epochs = 0;
  o.start_epoch = 0;
  return o;
}

std::unique_ptr<order::Order> mix_order(const dataset::Dataset& ds, const dataset::MixSampler& mix,
                                        uint64_t first_batch, const Options& o_in) {
  const Options o = checked(mix_options(mix, o_in));
  if (o.live)
    fail(A2PACK_E_UNSUPPORTED,
         "feed: {}: live follows the epoch and replay orders of a growing dataset; a mix names "
         "its rows when it is made (weight the newest rows with recent= instead)",
         ds.dir());
  const uint64_t rows = ds.rows();
  if (mix.min_index() < 0 || (mix.max_index() >= 0 && static_cast<uint64_t>(mix.max_index()) >= rows))
    fail(A2PACK_E_OUT_OF_RANGE, "feed: {}: the mix names row {}, outside the {} rows",
         ds.dir(), mix.min_index() < 0 ? mix.min_index() : mix.max_index(), rows);
  auto ord = std::make_unique<order::MixOrder>(mix, o.rank, o.world);
  // Fetched once here so that a batch the mix cannot give (before its last
  // weight change or loaded state) is refused at open, not at next().
  std::vector<int64_t> probe(ord->max_rows() + 1);
  order::Out out;
  out.indices = probe.data();
  ord->fill({0, first_batch}, out);
  return ord;
}

// Whether a CPU the process may use is left over beside `producers`
// threads (true where the affinity cannot be read).
bool cpu_beside(unsigned producers) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return true;
  return static_cast<unsigned>(CPU_COUNT(&set)) > producers;
}

}  // namespace

a2pack_feed_dtype moves_dtype(MovesType moves) {
  return moves == MovesType::kU8 ? A2PACK_FEED_DTYPE_U8
         : moves == MovesType::kI32 ? A2PACK_FEED_DTYPE_I32 : A2PACK_FEED_DTYPE_I64;
}

size_t row_bytes(uint32_t c, MovesType moves) {
  if (c >= kColumnCount) return 0;
  const ColumnSpec& spec = kColumnSpecs[c];
  return spec.width * dtype_bytes(c == kMoves ? moves_dtype(moves) : spec.dtype);
}

void Feed::check_forked() const {
  if (stamp_.forked())
    fail(A2PACK_E_CLOSED, "feed: this process was forked from the one that opened the feed, and "
         "its producer threads are not here; open a new feed in this process");
}

void Feed::check_options() { o_ = checked(o_); }

void Feed::make_ring(size_t part_rows) {
  part_max_ = part_rows;
  std::vector<size_t> bytes(kColumnCount, 0);
  for (uint32_t c = 0; c < kColumnCount; ++c)
    if (c == kIndices || (o_.columns >> c & 1)) bytes[c] = part_max_ * row_bytes(c, o_.moves);
  ring_ = std::make_shared<Ring>(o_.slots, bytes, o_.pin);
  ring_->moves_dtype = moves_dtype(o_.moves);
  ring_->unit_rows = order_->unit_rows();
  ready_.assign(std::max<uint32_t>(o_.depth, 1), nullptr);
}

void Feed::begin(Position p) {
  {
    std::lock_guard<std::mutex> lk(ring_->mu);
    restart_at(p);
  }
  try {
    start();
  } catch (...) {
    stop();  // the threads started so far, and whatever the order made ahead
    throw;
  }
}

Feed::Feed(std::shared_ptr<const Rows> rows, std::unique_ptr<order::Order> ord, Position first,
           const Options& o)
    : rows_(std::move(rows)), o_(o), order_(std::move(ord)) {
  check_options();
  make_ring(order_->max_rows());
  order_->set_helper_entry([this] { placement_.enter_helper(); });
  begin(first);
}

Feed::Feed(std::shared_ptr<const dataset::Dataset> ds, std::vector<int64_t> indices,
           bool all_rows, const Options& o)
    : Feed(dataset_rows(ds), epoch_order(*ds, std::move(indices), all_rows, o),
           Position{o.start_epoch, 0}, o) {
  if (o.live) live_ = LiveRows::of_dataset(ds, reopen_options(*ds), false);
}

dataset::Ranges LiveTables::runs_within(uint64_t rows) {
  std::lock_guard<std::mutex> lk(mu);
  dataset::Ranges out;
  for (const auto& r : runs) {
    if (static_cast<uint64_t>(r.first + r.count) > rows) break;  // runs are in row order
    out.push_back(r);
  }
  return out;
}

uint64_t Feed::refresh() {
  check_forked();
  if (!live_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: refresh takes in what was appended to the dataset of a live feed; this feed "
         "was opened without live");
  live_->settle();
  follow_growth();
  std::lock_guard<std::mutex> lk(ring_->mu);
  return rows_->rows();
}

size_t Feed::batch_indices(Position p, int64_t* out) const {
  const uint64_t n = order_->batches_in(p.epoch);
  if (n != order::Order::kEndless && p.batch >= n) return 0;
  order::Out o;
  o.indices = out;
  return order_->fill(p, o);
}

void Feed::seek(Position p) {
  check_forked();
  const uint64_t n = order_->batches_in(p.epoch);
  if (past_end(p) || (n != order::Order::kEndless && p.batch >= n))
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: no batch {} in epoch {} ({} batches{})", p.batch, p.epoch,
         past_end(p) ? 0 : n,
         past_end(p) ? fmt::format("; the feed ends before epoch {}", o_.epochs) : "");
  stop();
  begin(p);
}

ShardsInfo Feed::shards_info(uint64_t epoch) const {
  if (!shards_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: the shards' counters are a sharded dataset's feed's; this feed is over {}",
         order_->describe());
  ShardsInfo i;
  const auto layout = shards_->layout();
  i.manifest = layout->manifest;
  i.max_shard_bytes = layout->max_shard_bytes;
  i.cache = shards_->stats();
  const auto& blocks = static_cast<const order::BlockOrder&>(order_->maker_of({epoch, 0}));
  i.window_shards = blocks.sampler().window();
  const auto plan = blocks.plan(epoch);
  i.batches = plan->batches;
  i.rank_shards = plan->shards.size();
  i.rank_rows = plan->rows;
  return i;
}

bool Feed::wait_for_inserts(std::chrono::milliseconds timeout) {
  const auto t0 = Clock::now();
  for (;;) {
    uint64_t rows, served;
    {
      std::lock_guard<std::mutex> lk(ring_->mu);
      rows = rows_->rows();
      served = order_->sequence(normalized(state_next_)) * o_.batch_size;
    }
    if (rows >= o_.min_size &&
        static_cast<double>(served) <
            o_.samples_per_insert * static_cast<double>(rows - o_.min_size + 1)) {
      rate_wait_since_.reset();
      return true;
    }
    const auto now = Clock::now();
    if (!rate_wait_since_) rate_wait_since_ = now;
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - *rate_wait_since_);
    if (o_.rate_timeout_ms >= 0 && waited.count() >= o_.rate_timeout_ms) {
      rate_wait_since_.reset();  // the next call waits its own timeout again
      fail(A2PACK_E_FULL,
           "feed: rate limit: {} units served and the dataset holds {} rows; at {} samples per "
           "insert after {} rows the next batch needs more rows appended, and none came in {} "
           "ms (the learner is ahead of the actors)",
           served, rows, o_.samples_per_insert, o_.min_size, o_.rate_timeout_ms);
    }
    if (timeout.count() >= 0 && now - t0 >= timeout) return false;
    // The actors' next commit: looked for every few milliseconds (a stat).
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    follow_growth();
  }
}

void Feed::follow_growth() {
  std::optional<LiveRows::Grown> g = live_->poll();
  if (!g) return;
  const auto& live = static_cast<const order::LiveOrder&>(*order_);  // a live feed's order
  const uint64_t rows = g->rows;
  if (live_tables_) {
    std::lock_guard<std::mutex> lk(live_tables_->mu);
    live_tables_->runs = std::move(g->runs);
    // New rows join at the largest priority the rows had: each is drawn
    // soon, and its first update says what it is worth.
    if (auto& pr = live_tables_->priorities) pr->grow(rows, pr->largest());
  }
  Position at;
  {
    std::lock_guard<std::mutex> lk(ring_->mu);
    at = normalized(state_next_);
  }
  // A sharded dataset's cache grew in place; a single-file one was opened again.
  replace_order(live.grown(rows, at), at, g->ds ? dataset_rows(std::move(g->ds)) : nullptr);
}

Feed::Feed(std::shared_ptr<const dataset::Dataset> ds, const dataset::MixSampler& mix,
           uint64_t first_batch, const Options& o)
    : Feed(dataset_rows(ds), mix_order(*ds, mix, first_batch, o), Position{0, first_batch},
           mix_options(mix, o)) {}

std::unique_ptr<Feed> Feed::over_shards(const std::string& dir, const ShardOptions& so,
                                        const Options& o_in) {
  const Options o = checked(o_in);
  if (!o.shuffle)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: {}: a sharded dataset is read in its block shuffle (shards dealt out to the "
         "ranks, each window's rows shuffled); shuffle off is not an order it has",
         dir);
  if (o.batch_size % o.world)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: {}: a global batch of {} rows does not split evenly over {} ranks; each rank "
         "reads an equal share from its own shards",
         dir, o.batch_size, o.world);
  dataset::ShardCacheOptions co;
  co.budget_bytes = so.budget_bytes;
  co.verify_crc = so.verify_crc;
  co.huge_pages = so.huge_pages;
  co.prefetch = so.prefetch;
  std::shared_ptr<dataset::ShardCache> cache = dataset::ShardCache::open(dir, co);
  const uint32_t window = cache->window_for(so.window);
  const size_t part = static_cast<size_t>(o.batch_size / o.world);
  // Over the shards that hold the first `rows` rows: a live feed makes one
  // such order per generation of shards.
  auto make = [cache, window, part, o](uint64_t rows, uint64_t seed) {
    return order::BlockOrder::over(*cache->layout(), rows, window, seed, part, o.rank, o.world,
                                   o.drop_last);
  };
  std::unique_ptr<order::Order> ord;
  if (o.live) ord = std::make_unique<order::LiveOrder>(make, cache->rows(), o.seed);
  else ord = make(cache->rows(), o.seed);
  if (ord->batches_in(o.start_epoch) == 0)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: {}: epoch {} holds no batch of {} rows for each of {} ranks (the smallest "
         "rank's shards hold fewer rows); use smaller batches or fewer ranks",
         dir, o.start_epoch, part, o.world);
  std::unique_ptr<LiveRows> live = o.live ? LiveRows::of_shards(cache, window) : nullptr;
  auto f = std::make_unique<Feed>(shard_rows(cache), std::move(ord),
                                  Position{o.start_epoch, 0}, o);
  f->shards_ = std::move(cache);
  f->live_ = std::move(live);
  return f;
}

std::unique_ptr<Feed> Feed::over_replay(std::shared_ptr<const dataset::Dataset> ds,
                                        order::ReplayOrder::Options ro, const Options& o_in) {
  const Options o = checked(o_in);
  ro.batch_size = o.batch_size;
  ro.seed = o.seed;
  ro.shuffle = o.shuffle;
  ro.drop_last = o.drop_last;
  ro.rank = o.rank;
  ro.world = o.world;
  if (ds->rows() == 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed: {}: the dataset holds no rows", ds->dir());
  if (ro.priorities && ro.priorities->size() != ds->rows())
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: {} priorities for a dataset of {} rows: one priority per row",
         ro.priorities->size(), ds->rows());
  // Windows never cross a run's end: they need the runs (one SQL query).
  const bool windows = ro.window > 1;
  const dataset::Ranges runs = windows ? ds->select("", {}) : dataset::Ranges{};
  const Position first{ro.replacement || ro.priorities ? 0 : o.start_epoch, 0};
  Options fo = o;
  if (ro.replacement || ro.priorities) fo.epochs = 0;  // endless
  if (!o.live) {
    auto ord = std::make_unique<order::ReplayOrder>(runs, ds->rows(), ro);
    return std::make_unique<Feed>(dataset_rows(std::move(ds)), std::move(ord), first, fo);
  }
  auto tables = std::make_shared<LiveTables>();
  tables->runs = runs;
  tables->priorities = ro.priorities;
  auto ord = std::make_unique<order::LiveOrder>(
      [tables, ro](uint64_t n, uint64_t seed) {
        auto r = ro;
        r.seed = seed;
        return std::make_shared<order::ReplayOrder>(
            r.window > 1 ? tables->runs_within(n) : dataset::Ranges{}, n, r);
      },
      ds->rows(), ro.seed);
  auto f = std::make_unique<Feed>(dataset_rows(ds), std::move(ord), first, fo);
  f->live_tables_ = std::move(tables);
  const dataset::OpenOptions reopen = reopen_options(*ds);
  f->live_ = LiveRows::of_dataset(std::move(ds), reopen, windows);
  return f;
}

Feed::~Feed() { stop(); }

bool Feed::advance(Position* p) const {
  const uint64_t n = order_->batches_in(p->epoch);
  if (n == order::Order::kEndless) {
    ++p->batch;
    return true;
  }
  if (++p->batch >= n) *p = normalized(*p);
  return !past_end(*p);
}

Position Feed::normalized(Position p) const {
  const uint64_t n = order_->batches_in(p.epoch);
  if (n == order::Order::kEndless || p.batch < n) return p;
  // A state may say "after the last batch of epoch e": that is batch 0 of e + 1.
  p = {p.epoch + 1, 0};
  for (int i = 0; i < kMaxEmptyEpochs && !past_end(p) && order_->batches_in(p.epoch) == 0; ++i)
    ++p.epoch;
  return p;
}

void Feed::restart_at(Position p) {
  issue_pos_ = normalized(p);
  exhausted_ = past_end(issue_pos_);
  seq_base_ = order_->sequence(issue_pos_);
  order_->restart(issue_pos_);
  for (Slot*& r : ready_)
    if (r) {
      ring_->free_list.push_back(r);
      r = nullptr;
    }
  if (returned_) {  // a batch of the old order: made again if the new one has it
    ring_->free_list.push_back(returned_);
    returned_ = nullptr;
  }
  last_ = nullptr;
  ring_->ready = 0;
  ring_->consumer_fast = false;
  pace_.reset();
  issued_ = consumed_ = 0;
  stop_ = failed_ = false;
  error_ = nullptr;
  state_next_ = p;
}

void Feed::start() {
  if (o_.depth == 0) return;
  placement_.begin(o_.spare_consumer_cpu);
  poll_ = cpu_beside(o_.threads);
  threads_.reserve(o_.threads);
  for (unsigned t = 0; t < o_.threads; ++t) {
    try {
      threads_.emplace_back([this, t] { produce(t); });
    } catch (const std::system_error& e) {
      // begin() stops the ones started.
      fail(A2PACK_E_NO_MEMORY,
           "feed: cannot start producer thread {} of {}: {}; open the feed with fewer threads, "
           "or raise the process's limits on threads and memory",
           t + 1, o_.threads, e.what());
    }
  }
}

void Feed::stop() {
  {
    std::lock_guard<std::mutex> lk(ring_->mu);
    stop_ = true;
  }
  ring_->freed.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  order_->stop();
}

bool Feed::take_ticket(uint64_t* ticket, Position* p) {
  if (exhausted_) return false;
  *ticket = issued_++;
  *p = issue_pos_;
  exhausted_ = !advance(&issue_pos_);
  return true;
}

void Feed::fill(Slot* s, Position p, uint64_t sequence, uint32_t workers) {
  auto* idx = reinterpret_cast<int64_t*>(s->base + ring_->offset(kIndices));
  auto col = [&](uint32_t c) -> void* {
    return ring_->has(c) ? s->base + ring_->offset(c) : nullptr;
  };
  order::Out to;
  to.indices = idx;
  to.valid = static_cast<uint8_t*>(col(kValid));
  to.weights = static_cast<float*>(col(kWeights));
  if (to.valid) std::memset(to.valid, 1, part_max_);
  if (to.weights) std::fill_n(to.weights, part_max_, 1.0f);
  const size_t rows = order_->fill(p, to);
  const uint64_t global_rows = to.global_rows;
  rows_->want(order_->residency(p));
  dataset::ColumnsOut out;
  out.exponents = static_cast<uint8_t*>(col(kExponents));
  if (void* m = col(kMoves)) {
    if (o_.moves == MovesType::kU8) out.moves = static_cast<uint8_t*>(m);
    else if (o_.moves == MovesType::kI32) out.moves_i32 = static_cast<int32_t*>(m);
    else out.moves_i64 = static_cast<int64_t*>(m);
  }
  out.legal = static_cast<uint8_t*>(col(kLegal));
  out.ev_values = static_cast<float*>(col(kEvValues));
  out.boards = static_cast<uint64_t*>(col(kBoards));
  out.run_ids = static_cast<uint32_t*>(col(kRunIds));
  out.step_indices = static_cast<uint16_t*>(col(kStepIndices));
  out.legal_mask = static_cast<uint8_t*>(col(kLegalMask));
  rows_->gather(idx, rows, out, workers);
  s->epoch = p.epoch;
  s->batch = p.batch;
  s->rows = rows;
  s->global_rows = global_rows;
  s->sequence = sequence;
}

void Feed::produce(unsigned) {
  placement_.enter_producer();
  std::unique_lock<std::mutex> lk(ring_->mu);
  auto can_take = [this] {
    return stop_ || (!failed_ && !exhausted_ && issued_ - consumed_ < o_.depth &&
                     !ring_->free_list.empty());
  };
  for (;;) {
    if (!can_take()) {
      // Idle: waiting for a slot or for the consumer to come within depth
      // (not the wait after the end or after a failure).
      const bool counts = !failed_ && !exhausted_;
      const auto t0 = Clock::now();
      // Told only when the consumer needs a batch at once; otherwise looks
      // again when the consumer's pace says room will have been made. After
      // the end or a failure only stop() (which tells them) changes anything.
      while (!can_take()) {
        if (failed_ || exhausted_) ring_->freed.wait(lk);
        else ring_->freed.wait_until(lk, pace_.next_look(Clock::now()));
      }
      if (counts) idle_ns_.fetch_add(ns_since(t0), std::memory_order_relaxed);
    }
    if (stop_) return;
    uint64_t t = 0;  // take_ticket sets it (GCC cannot see that)
    Position p;
    take_ticket(&t, &p);
    const uint64_t seq = seq_base_ + t;
    Slot* s = ring_->free_list.back();
    ring_->free_list.pop_back();
    lk.unlock();
    const auto t0 = Clock::now();
    std::exception_ptr err;
    try {
      fill(s, p, seq, 1);
    } catch (...) {
      err = std::current_exception();
    }
    busy_ns_.fetch_add(ns_since(t0), std::memory_order_relaxed);
    lk.lock();
    if (err) {
      // The consumer gets the error when it reaches this batch; no further
      // batches are started.
      ring_->free_list.push_back(s);
      if (!failed_ || t < error_ticket_) {
        error_ = err;
        error_ticket_ = t;
      }
      failed_ = true;
    } else {
      ready_[t % o_.depth] = s;
      ++ring_->ready;
    }
    fills_.fetch_add(1, std::memory_order_release);
    filled_.notify_all();
  }
}

Slot* Feed::hand_out(Slot* s) {
  ++consumed_;
  ++ring_->held;
  s->refs.store(1, std::memory_order_relaxed);
  s->keep = ring_;
  state_next_ = {s->epoch, s->batch + 1};
  last_ = s;
  served_.fetch_add(1, std::memory_order_relaxed);
  rows_served_.fetch_add(s->rows, std::memory_order_relaxed);
  return s;
}

void Feed::put_back(Slot* s) {
  std::lock_guard<std::mutex> lk(ring_->mu);
  if (!s || s != last_ || s->refs.load(std::memory_order_acquire) != 1)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: put_back takes the batch next() handed out last, holding only the reference "
         "next() gave; this one is {}",
         !s || s->ring != ring_.get() ? "not of this feed"
         : s == returned_             ? "given back already"
         : s != last_ ? "not the last one handed out (or from before a load_state or set_weights)"
                      : "retained elsewhere");
  // Undo hand_out(): the state is again the one before this batch.
  --consumed_;
  --ring_->held;
  ++ring_->ready;
  s->refs.store(0, std::memory_order_relaxed);
  s->keep.reset();  // the feed holds the ring meanwhile
  state_next_ = {s->epoch, s->batch};
  served_.fetch_sub(1, std::memory_order_relaxed);
  rows_served_.fetch_sub(s->rows, std::memory_order_relaxed);
  returned_ = s;
  last_ = nullptr;
}

Slot* Feed::next(std::chrono::milliseconds timeout, bool* ended) {
  *ended = false;
  check_forked();
  // A batch put back is handed out again as it was, before any growth.
  if (live_ && !returned_) {
    follow_growth();
    if (o_.samples_per_insert > 0 && !wait_for_inserts(timeout)) return nullptr;
  }
  std::unique_lock<std::mutex> lk(ring_->mu);
  if (returned_) {  // ticket consumed_ itself, ahead of everything else
    Slot* s = std::exchange(returned_, nullptr);
    --ring_->ready;
    return hand_out(s);
  }
  if (failed_ && error_ticket_ == consumed_) std::rethrow_exception(error_);
  if (exhausted_ && consumed_ >= issued_) {
    *ended = true;
    return nullptr;
  }
  auto full = [&] {
    return Error(A2PACK_E_FULL,
                 fmt::format("feed: the consumer holds all {} ring slots; release a batch (drop "
                             "every view of it) before asking for the next, or open the feed "
                             "with more slots",
                             ring_->slot_count()));
  };
  if (o_.depth == 0) {
    // Synchronous: the batch is gathered here, with `threads` gather threads.
    if (ring_->free_list.empty()) throw full();
    Slot* s = ring_->free_list.back();
    ring_->free_list.pop_back();
    // Taken back if the gather fails, so that the next call tries it again.
    const Position before = issue_pos_;
    const bool was_exhausted = exhausted_;
    uint64_t t = 0;  // as above
    Position p;
    take_ticket(&t, &p);
    lk.unlock();
    const auto t0 = Clock::now();
    try {
      fill(s, p, seq_base_ + t, o_.threads);
    } catch (...) {
      lk.lock();
      ring_->free_list.push_back(s);
      issue_pos_ = before;
      exhausted_ = was_exhausted;
      --issued_;
      throw;
    }
    wait_ns_.fetch_add(ns_since(t0), std::memory_order_relaxed);
    lk.lock();
    return hand_out(s);  // no producers to tell
  }
  const size_t i = consumed_ % o_.depth;
  if (!ready_[i]) {
    if (ring_->held >= ring_->slot_count()) throw full();
    auto ok = [&] { return ready_[i] != nullptr || (failed_ && error_ticket_ == consumed_); };
    const auto t0 = Clock::now();
    if (poll_ && issued_ > consumed_ && timeout.count() != 0) {
      // The batch is being gathered and will be ready within tens of
      // microseconds: poll for a short window instead of sleeping at once
      // (a futex wake-up costs about as much as the gather itself). Only
      // with a CPU to spare beside the producers: where they take every
      // CPU (two producers on two), polling takes one from the gather it
      // waits for: measured on 2 vCPUs at 0 ms steps, two producers
      // delivered 52 M rows/s at 4 M rows polling, 74 M blocking at once.
      const uint64_t seen = fills_.load(std::memory_order_acquire);
      lk.unlock();
      spin_until([&] { return fills_.load(std::memory_order_acquire) != seen; },
                 std::chrono::microseconds(kSpinMicros));
      lk.lock();
    }
    bool got = true;
    // The producers may be asleep until their next look, or kept off this
    // CPU: this batch is needed now, and this CPU is free while we wait.
    placement_.consumer_at(threads_, true);
    ring_->consumer_waiting = true;
    ring_->freed.notify_all();
    if (timeout.count() < 0) filled_.wait(lk, ok);
    else got = filled_.wait_for(lk, timeout, ok);
    ring_->consumer_waiting = false;
    wait_ns_.fetch_add(ns_since(t0), std::memory_order_relaxed);
    if (!got) return nullptr;
    if (!ready_[i]) std::rethrow_exception(error_);
  }
  Slot* s = ready_[i];
  ready_[i] = nullptr;
  --ring_->ready;
  hand_out(s);
  pace_.took(Clock::now());
  ring_->consumer_fast = pace_.fast();
  placement_.consumer_at(threads_, ring_->consumer_fast);
  const bool wake = ring_->urgent();
  lk.unlock();
  // Room for one more batch ahead. A producer finds it at its next look
  // (feed/pace.hpp) unless none is ready now or the consumer is fast: then
  // one producer starts at once, told after the lock is released so that it
  // does not wake into a held lock. One, since every producer waits for the
  // same thing and this is room for one batch.
  if (wake) ring_->freed.notify_one();
  return s;
}

Stats Feed::stats() const {
  Stats st;
  st.batches_served = served_.load(std::memory_order_relaxed);
  st.rows_served = rows_served_.load(std::memory_order_relaxed);
  st.consumer_wait_ns = wait_ns_.load(std::memory_order_relaxed);
  st.producer_idle_ns = idle_ns_.load(std::memory_order_relaxed);
  st.producer_busy_ns = busy_ns_.load(std::memory_order_relaxed);
  st.slot_bytes = ring_->slot_bytes();
  st.threads = o_.depth ? o_.threads : 0;
  st.depth = o_.depth;
  st.slots = static_cast<uint32_t>(ring_->slot_count());
  st.pinned = ring_->pinned();
  st.spared_cpu = placement_.spared();
  std::lock_guard<std::mutex> lk(ring_->mu);
  const Position p = normalized(state_next_);
  st.epoch = p.epoch;
  st.next_batch = p.batch;
  const uint64_t n = order_->batches_in(p.epoch);
  st.batches_per_epoch = n == order::Order::kEndless ? 0 : n;  // 0: endless (a mix)
  st.held = ring_->held;
  st.seed = order_->seed();
  st.ready = ring_->ready;
  return st;
}

std::string Feed::save_state() const {
  std::string inner;
  uint32_t flags;
  {
    std::lock_guard<std::mutex> lk(ring_->mu);
    inner = order_->save_state(state_next_);
    flags = state_flags(*order_) | (live_ ? kFlagLive : 0u);
  }
  std::string s(kMagic, 4);
  le::append<uint32_t>(s, kVersion);
  le::append<uint32_t>(s, flags);
  le::append<uint32_t>(s, rows_->rows_crc());
  le::append<uint64_t>(s, rows_->rows());
  le::append<uint32_t>(s, static_cast<uint32_t>(inner.size()));
  s += inner;
  le::append<uint32_t>(s, crc32c::compute(s.data(), s.size()));
  return s;
}

void Feed::load_state(const void* data, size_t len) {
  check_forked();
  const auto* p = static_cast<const uint8_t*>(data);
  if (p && len >= 4 && std::memcmp(p, kShardStreamMagic, 4) == 0 && shards_ && !live_) {
    // A shard stream's state (a2pack_shard_stream_state_save) is the block
    // order's own: it checks the seed, batch, ranks, window and the shards
    // it was taken over (appended shards join at the next epoch).
    Position next;
    auto o = order_->load_state(p, len, &next);
    replace_order(std::move(o), next);
    return;
  }
  if (!p || len < kHeader + 4 || std::memcmp(p, kMagic, 4) != 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "not a feed state ({} bytes, no 'A2FS' magic{})", len,
         shards_ && !live_ ? " nor a shard stream's 'A2BS'" : "");
  const uint32_t version = le::load<uint32_t>(p + 4);
  if (version != kVersion)
    fail(A2PACK_E_UNSUPPORTED, "feed state version {}: this library reads version {}", version,
         kVersion);
  const uint32_t inner_len = le::load<uint32_t>(p + 24);
  if (len != kHeader + inner_len + 4)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed state of {} bytes: its header says {}", len,
         kHeader + uint64_t{inner_len} + 4);
  const uint32_t crc = le::load<uint32_t>(p + len - 4);
  if (crc != crc32c::compute(p, len - 4))
    fail(A2PACK_E_CORRUPT, "feed state damaged: CRC32C {:08x}, expected {:08x}", crc,
         crc32c::compute(p, len - 4));
  const uint32_t flags = le::load<uint32_t>(p + 8);
  if (flags & ~kKnownFlags)
    fail(A2PACK_E_UNSUPPORTED, "feed state has flags 0x{:x}: this library knows 0x{:x}", flags,
         kKnownFlags);
  const uint32_t rows_crc = le::load<uint32_t>(p + 12);
  const uint64_t rows = le::load<uint64_t>(p + 16);
  // A live feed, or one over a sharded dataset, resumes over rows appended
  // after the state (the block order takes appended shards in at the next
  // epoch; its own state names the shards it was taken over).
  const bool grows = live_ || shards_;
  const bool same_rows = grows ? rows <= rows_->rows() && rows_crc == rows_->prefix_crc(rows)
                               : rows == rows_->rows() && rows_crc == rows_->rows_crc();
  if (!same_rows)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed state was taken over another dataset ({} rows, CRC32C {:08x}); {} has {} rows, "
         "CRC32C {:08x}{}",
         rows, rows_crc, rows_->dir(), rows_->rows(), rows_->rows_crc(),
         grows ? " (a live or sharded feed resumes over the rows the state read, and rows "
                 "appended after)"
               : "");
  const uint32_t mine = state_flags(*order_) | (live_ ? kFlagLive : 0u);
  if ((flags & kFlagLive) != (mine & kFlagLive))
    fail(A2PACK_E_INVALID_ARGUMENT, "feed state was taken from a feed {} live; this one is {}",
         flags & kFlagLive ? "with" : "without", live_ ? "live" : "not");
  const uint32_t kinds = kFlagMix | kFlagBlocks | kFlagReplay;
  if ((flags & kinds) != (mine & kinds))
    fail(A2PACK_E_INVALID_ARGUMENT, "feed state was taken from a feed over {}; this feed is over {}",
         kind_words(flags), kind_words(mine));
  if (flags != mine)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed state was taken with shuffle {}; this feed has shuffle {}",
         flags & kFlagShuffle ? "on" : "off", mine & kFlagShuffle ? "on" : "off");
  // Checked (and anything its position needs made) before anything changes.
  Position next;
  auto o = order_->load_state(p + kHeader, inner_len, &next);
  if (live_) {
    // Rows appended after the state was taken join at its position.
    const auto& loaded = static_cast<const order::LiveOrder&>(*o);
    if (loaded.rows() < rows_->rows()) o = loaded.grown(rows_->rows(), next);
  }
  replace_order(std::move(o), next);
}

void Feed::set_weights(const std::vector<double>& weights) {
  check_forked();
  const auto* mix = dynamic_cast<const order::MixOrder*>(order_.get());
  if (!mix)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: set_weights needs a feed over a mixing sampler; this one is over {}",
         order_->describe());
  uint64_t from;
  {
    std::lock_guard<std::mutex> lk(ring_->mu);
    from = normalized(state_next_).batch;
  }
  // On a copy first: weights the mix refuses (it throws) leave the feed as it was.
  auto o = mix->with_weights(weights, from);
  replace_order(std::move(o), Position{0, from});
}

void Feed::replace_order(std::unique_ptr<order::Order> o, Position p,
                         std::shared_ptr<const Rows> rows) {
  stop();
  {
    std::lock_guard<std::mutex> lk(ring_->mu);
    order_ = std::move(o);
    if (rows) rows_ = std::move(rows);
  }
  order_->set_helper_entry([this] { placement_.enter_helper(); });
  begin(p);
}

}  // namespace a2pack::feed
