#include "feed/feed.hpp"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <utility>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/spin.hpp"

namespace a2pack::feed {

namespace {

using Clock = std::chrono::steady_clock;
// How long next() polls for a batch being gathered before it sleeps.
constexpr int kSpinMicros = 100;
uint64_t ns_since(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// The feed's checkpoint: its own header around the sampler's state.
//   "A2FS" · u32 version · u32 flags (bit 0: shuffle, bit 1: a mixing
//   sampler's state) · u32 rows CRC32C · u64 dataset rows · u32 sampler
//   state length · sampler (or mix) state · u32 CRC32C
// of everything before it. The dataset's row count and manifest CRC refuse a
// state taken over another dataset (the sampler's own hash covers the
// selection, not the rows' contents).
constexpr char kMagic[4] = {'A', '2', 'F', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 4 + 4 + 4 + 4 + 8 + 4;
constexpr uint32_t kFlagShuffle = 1, kFlagMix = 2;

// Bytes per row of each column (moves: by type).
size_t row_bytes(uint32_t c, MovesType moves) {
  switch (c) {
    case kExponents: return 16;
    case kMoves: return moves == MovesType::kU8 ? 1 : moves == MovesType::kI32 ? 4 : 8;
    case kLegal: return 4;
    case kEvValues: return 16;
    case kBoards: return 8;
    case kRunIds: return 4;
    case kStepIndices: return 2;
    case kLegalMask: return 1;
    case kIndices: return 8;
  }
  return 0;
}

}  // namespace

void Feed::check_options() {
  if (o_.batch_size == 0) fail(A2PACK_E_INVALID_ARGUMENT, "feed: batch_size must be at least 1");
  if (o_.world == 0 || o_.rank >= o_.world)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed: rank {} of a world of {}: expected 0 <= rank < world",
         o_.rank, o_.world);
  if (o_.threads == 0) o_.threads = 1;
  if (o_.slots == 0) o_.slots = o_.depth + 2;
  if (o_.slots < o_.depth + 1 || o_.slots < 1)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: {} slots for a depth of {}: the ring needs at least depth + 1 slots (one for "
         "the consumer)",
         o_.slots, o_.depth);
}

void Feed::make_ring(uint64_t batch_len) {
  part_max_ = static_cast<size_t>((batch_len + o_.world - 1) / o_.world);
  if (const auto& m = ds_->manifest(); m) rows_crc_ = m->steps_crc32c;
  std::vector<size_t> bytes(kColumnCount, 0);
  for (uint32_t c = 0; c < kColumnCount; ++c)
    if (c == kIndices || (o_.columns >> c & 1)) bytes[c] = part_max_ * row_bytes(c, o_.moves);
  ring_ = std::make_shared<Ring>(o_.slots, bytes, o_.pin);
  ring_->moves_itemsize = static_cast<uint32_t>(row_bytes(kMoves, o_.moves));
  ready_.assign(std::max<uint32_t>(o_.depth, 1), nullptr);
}

void Feed::begin(uint64_t epoch, uint64_t batch, std::shared_ptr<const dataset::Sampler> s) {
  {
    std::lock_guard<std::mutex> lk(ring_->mu);
    restart_at(epoch, batch, std::move(s));
  }
  try {
    start();
  } catch (...) {
    stop();  // the threads started so far, and the epoch being made ahead
    throw;
  }
}

Feed::Feed(std::shared_ptr<const dataset::Dataset> ds, std::vector<int64_t> indices,
           bool all_rows, const Options& o)
    : ds_(std::move(ds)), all_rows_(all_rows), o_(o) {
  check_options();
  const uint64_t rows = ds_->rows();
  uint64_t n = all_rows_ ? rows : indices.size();
  if (n == 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed: {}: the selection is empty ({} rows in the dataset)",
         ds_->dir(), rows);
  if (!all_rows_) {
    for (size_t i = 0; i < indices.size(); ++i)
      if (indices[i] < 0 || static_cast<uint64_t>(indices[i]) >= rows)
        fail(A2PACK_E_OUT_OF_RANGE, "feed: {}: index {} (position {} of the selection) is "
             "outside the {} rows", ds_->dir(), indices[i], i, rows);
  }
  // The samplers of the epochs share the selection (unshuffled batches are
  // slices of it) and each has its own permutation; the template keeps none
  // (each costs 4 bytes a row).
  base_ = std::make_unique<dataset::Sampler>(std::move(indices), all_rows_, n, o_.seed,
                                             static_cast<size_t>(o_.batch_size), o_.drop_last,
                                             /*ordered=*/false, o_.shuffle_kind);
  batch_count_ = base_->batch_count();
  if (batch_count_ == 0)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: {} rows make no whole batch of {} (drop_last is set): an epoch would be empty",
         n, o_.batch_size);
  make_ring(std::min<uint64_t>(o_.batch_size, n));
  begin(o_.start_epoch, 0, sampler_for(o_.start_epoch));
}

Feed::Feed(std::shared_ptr<const dataset::Dataset> ds, const dataset::MixSampler& mix,
           uint64_t first_batch, const Options& o)
    : ds_(std::move(ds)), all_rows_(false), o_(o) {
  o_.batch_size = mix.batch_size();
  o_.seed = mix.seed();
  o_.shuffle = true;
  o_.drop_last = false;
  o_.epochs = 0;
  o_.start_epoch = 0;
  check_options();
  const uint64_t rows = ds_->rows();
  if (mix.min_index() < 0 || (mix.max_index() >= 0 && static_cast<uint64_t>(mix.max_index()) >= rows))
    fail(A2PACK_E_OUT_OF_RANGE, "feed: {}: the mix names row {}, outside the {} rows",
         ds_->dir(), mix.min_index() < 0 ? mix.min_index() : mix.max_index(), rows);
  mix_ = std::make_unique<dataset::MixSampler>(mix);
  {
    // Fetched once here so that a batch the mix cannot give (before its last
    // weight change or loaded state) is refused at open, not at next().
    std::vector<int64_t> probe(o_.batch_size);
    mix_->fill_part(first_batch, 0, 1, probe.data(), nullptr);
  }
  // One endless epoch: the position is the mix's global batch number.
  batch_count_ = UINT64_MAX;
  make_ring(o_.batch_size);
  begin(0, first_batch, nullptr);
}

Feed::~Feed() { stop(); }

Feed::Position Feed::position(uint64_t ticket) const {
  const uint64_t pos = start_batch_ + ticket;
  return {start_epoch_ + pos / batch_count_, pos % batch_count_};
}

std::shared_ptr<const dataset::Sampler> Feed::make_epoch(uint64_t epoch) const {
  // A copy of the template (O(1)) shuffled for the epoch (O(n)); unshuffled
  // batches need no permutation.
  auto s = std::make_shared<dataset::Sampler>(*base_);
  s->set_epoch(epoch, o_.shuffle);
  return s;
}

void Feed::add_epoch(std::shared_ptr<const dataset::Sampler> s) {
  building_.erase(std::remove(building_.begin(), building_.end(), s->epoch()), building_.end());
  uint64_t newest = s->epoch();
  for (const auto& x : epochs_) newest = std::max(newest, x->epoch());
  epochs_.push_back(std::move(s));
  keep_epochs_up_to(newest);
  epoch_cv_.notify_all();
}

void Feed::keep_epochs_up_to(uint64_t newest) {
  // The newest, the current one before it and the previous one, whose last
  // batches threads may still be filling: at most three permutations of 4
  // bytes a row. Older ones live on in the slots and fills that hold them
  // (a thread stalled that long remakes its epoch).
  epochs_.erase(std::remove_if(epochs_.begin(), epochs_.end(),
                               [newest](const auto& x) { return x->epoch() + 2 < newest; }),
                epochs_.end());
}

std::shared_ptr<const dataset::Sampler> Feed::sampler_for(uint64_t epoch) {
  std::unique_lock<std::mutex> lk(epoch_mu_);
  for (;;) {
    for (const auto& s : epochs_)
      if (s->epoch() == epoch) {
        auto found = s;  // prepare() may drop older entries from epochs_
        prepare(epoch + 1, lk);
        return found;
      }
    if (std::find(building_.begin(), building_.end(), epoch) == building_.end()) break;
    epoch_cv_.wait(lk);  // being made (ahead, or by another producer)
  }
  building_.push_back(epoch);
  lk.unlock();
  std::shared_ptr<const dataset::Sampler> s;
  try {
    s = make_epoch(epoch);
  } catch (...) {
    lk.lock();
    building_.erase(std::remove(building_.begin(), building_.end(), epoch), building_.end());
    epoch_cv_.notify_all();
    throw;
  }
  lk.lock();
  add_epoch(s);
  prepare(epoch + 1, lk);
  return s;
}

void Feed::prepare(uint64_t epoch, std::unique_lock<std::mutex>&) {
  if (o_.epochs != 0 && epoch >= o_.epochs) return;
  for (const auto& s : epochs_)
    if (s->epoch() == epoch) return;
  if (std::find(building_.begin(), building_.end(), epoch) != building_.end()) return;
  if (prep_.joinable()) {
    if (!prep_done_) return;  // one at a time
    prep_.join();             // finished: it no longer needs the lock
  }
  keep_epochs_up_to(epoch);  // before the next one is made, not after
  building_.push_back(epoch);
  prep_done_ = false;
  try {
    prep_ = std::thread([this, epoch] {
      placement_.enter_helper();
      std::shared_ptr<const dataset::Sampler> s;
      try {
        s = make_epoch(epoch);
      } catch (...) {
        // Made again on demand, where the error reaches the consumer.
      }
      std::lock_guard<std::mutex> lk(epoch_mu_);
      if (s) {
        add_epoch(std::move(s));
      } else {
        building_.erase(std::remove(building_.begin(), building_.end(), epoch), building_.end());
        epoch_cv_.notify_all();
      }
      prep_done_ = true;
    });
  } catch (const std::system_error&) {
    // No thread to make it ahead (out of threads or memory): the producer
    // that first needs the epoch makes it (sampler_for).
    building_.erase(std::remove(building_.begin(), building_.end(), epoch), building_.end());
    prep_done_ = true;
  }
}

void Feed::join_prep() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lk(epoch_mu_);
    t = std::move(prep_);
  }
  if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lk(epoch_mu_);
  prep_done_ = true;
}

void Feed::restart_at(uint64_t epoch, uint64_t batch,
                      std::shared_ptr<const dataset::Sampler> s) {
  // A state may say "after the last batch of epoch e": that is batch 0 of e + 1.
  start_epoch_ = epoch + batch / batch_count_;
  start_batch_ = batch % batch_count_;
  if (o_.epochs == 0) {
    total_ = UINT64_MAX;
  } else {
    const unsigned __int128 end = static_cast<unsigned __int128>(o_.epochs) * batch_count_;
    const unsigned __int128 at =
        static_cast<unsigned __int128>(start_epoch_) * batch_count_ + start_batch_;
    total_ = end > at ? static_cast<uint64_t>(std::min<unsigned __int128>(end - at, UINT64_MAX))
                      : 0;
  }
  for (Slot*& r : ready_)
    if (r) {
      ring_->free_list.push_back(r);
      r = nullptr;
    }
  if (returned_) {  // a batch of the old order: made again if the new one has it
    returned_->sampler.reset();
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
  state_sampler_ = std::move(s);
  state_next_ = batch;
}

void Feed::start() {
  if (o_.depth == 0) return;
  placement_.begin(o_.spare_consumer_cpu);
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
  join_prep();
}

void Feed::fill(Slot* s, uint64_t ticket, uint32_t workers) {
  const Position p = position(ticket);
  auto* idx = reinterpret_cast<int64_t*>(s->base + ring_->offset(kIndices));
  std::shared_ptr<const dataset::Sampler> smp;
  size_t len, rows;
  if (mix_) {
    len = static_cast<size_t>(o_.batch_size);
    std::lock_guard<std::mutex> lk(mix_mu_);
    rows = mix_->fill_part(p.batch, o_.rank, o_.world, idx, nullptr);
  } else {
    smp = sampler_for(p.epoch);
    len = base_->batch_length(static_cast<size_t>(p.batch));
    if (o_.shuffle) {
      rows = smp->fill_part(static_cast<size_t>(p.batch), o_.rank, o_.world, idx);
    } else {
      size_t lo, hi;
      dataset::Sampler::part_bounds(len, o_.rank, o_.world, &lo, &hi);
      rows = hi - lo;
      const uint64_t first = p.batch * o_.batch_size + lo;
      if (all_rows_) {
        for (size_t i = 0; i < rows; ++i) idx[i] = static_cast<int64_t>(first + i);
      } else {
        std::memcpy(idx, base_->selection().data() + first, rows * sizeof(int64_t));
      }
    }
  }
  auto col = [&](uint32_t c) -> void* {
    return ring_->has(c) ? s->base + ring_->offset(c) : nullptr;
  };
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
  ds_->gather_columns(idx, rows, out, workers);
  s->epoch = p.epoch;
  s->batch = p.batch;
  s->rows = rows;
  s->global_rows = len;
  s->sequence = p.epoch * batch_count_ + p.batch;
  s->sampler = std::move(smp);
}

void Feed::produce(unsigned) {
  placement_.enter_producer();
  std::unique_lock<std::mutex> lk(ring_->mu);
  auto can_take = [this] {
    return stop_ || (!failed_ && issued_ < total_ && issued_ - consumed_ < o_.depth &&
                     !ring_->free_list.empty());
  };
  for (;;) {
    if (!can_take()) {
      // Idle: waiting for a slot or for the consumer to come within depth
      // (not the wait after the end or after a failure).
      const bool counts = !failed_ && issued_ < total_;
      const auto t0 = Clock::now();
      // Told only when the consumer needs a batch at once; otherwise looks
      // again when the consumer's pace says room will have been made. After
      // the end or a failure only stop() (which tells them) changes anything.
      while (!can_take()) {
        if (failed_ || issued_ >= total_) ring_->freed.wait(lk);
        else ring_->freed.wait_until(lk, pace_.next_look(Clock::now()));
      }
      if (counts) idle_ns_.fetch_add(ns_since(t0), std::memory_order_relaxed);
    }
    if (stop_) return;
    const uint64_t t = issued_++;
    Slot* s = ring_->free_list.back();
    ring_->free_list.pop_back();
    lk.unlock();
    const auto t0 = Clock::now();
    std::exception_ptr err;
    try {
      fill(s, t, 1);
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
  // Copied when the epoch changes only: the producers copy the same
  // shared pointer at every fill, and its count's cache line is theirs.
  if (state_sampler_ != s->sampler) state_sampler_ = s->sampler;
  state_next_ = s->batch + 1;
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
  // Undo hand_out(): the state is again the one before this batch (its
  // sampler at its batch is the same place as the previous batch's end).
  --consumed_;
  --ring_->held;
  ++ring_->ready;
  s->refs.store(0, std::memory_order_relaxed);
  s->keep.reset();  // the feed holds the ring meanwhile
  state_sampler_ = s->sampler;
  state_next_ = s->batch;
  served_.fetch_sub(1, std::memory_order_relaxed);
  rows_served_.fetch_sub(s->rows, std::memory_order_relaxed);
  returned_ = s;
  last_ = nullptr;
}

Slot* Feed::next(std::chrono::milliseconds timeout, bool* ended) {
  *ended = false;
  if (stamp_.forked())
    fail(A2PACK_E_CLOSED, "feed: this process was forked from the one that opened the feed, and "
         "its producer threads are not here; open a new feed in this process");
  std::unique_lock<std::mutex> lk(ring_->mu);
  if (returned_) {  // ticket consumed_ itself, ahead of everything else
    Slot* s = std::exchange(returned_, nullptr);
    --ring_->ready;
    return hand_out(s);
  }
  if (failed_ && error_ticket_ == consumed_) std::rethrow_exception(error_);
  if (consumed_ >= total_) {
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
    const uint64_t t = consumed_;
    lk.unlock();
    const auto t0 = Clock::now();
    try {
      fill(s, t, o_.threads);
    } catch (...) {
      lk.lock();
      ring_->free_list.push_back(s);
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
    if (issued_ > consumed_ && timeout.count() != 0) {
      // The batch is being gathered and will be ready within tens of
      // microseconds: poll for a short window instead of sleeping at once
      // (a futex wake-up costs about as much as the gather itself).
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
  st.batches_per_epoch = mix_ ? 0 : batch_count_;  // 0: endless (a mix)
  st.slot_bytes = ring_->slot_bytes();
  st.threads = o_.depth ? o_.threads : 0;
  st.depth = o_.depth;
  st.slots = static_cast<uint32_t>(ring_->slot_count());
  st.pinned = ring_->pinned();
  st.spared_cpu = placement_.spared();
  std::lock_guard<std::mutex> lk(ring_->mu);
  const Position p = position(consumed_);
  st.epoch = p.epoch;
  st.next_batch = p.batch;
  st.held = ring_->held;
  st.seed = mix_ ? mix_->seed() : state_sampler_->seed();
  st.ready = ring_->ready;
  return st;
}

std::string Feed::save_state() const {
  std::string inner;
  {
    std::lock_guard<std::mutex> lk(ring_->mu);
    if (mix_) {
      std::lock_guard<std::mutex> mlk(mix_mu_);
      inner = mix_->save_state(state_next_);
    } else {
      inner = state_sampler_->save_state(state_next_);
    }
  }
  std::string s(kMagic, 4);
  le::append<uint32_t>(s, kVersion);
  le::append<uint32_t>(s, (o_.shuffle ? kFlagShuffle : 0u) | (mix_ ? kFlagMix : 0u));
  le::append<uint32_t>(s, rows_crc_);
  le::append<uint64_t>(s, ds_->rows());
  le::append<uint32_t>(s, static_cast<uint32_t>(inner.size()));
  s += inner;
  le::append<uint32_t>(s, crc32c::compute(s.data(), s.size()));
  return s;
}

void Feed::load_state(const void* data, size_t len) {
  if (stamp_.forked())
    fail(A2PACK_E_CLOSED, "feed: this process was forked from the one that opened the feed; "
         "open a new feed in this process");
  const auto* p = static_cast<const uint8_t*>(data);
  if (!p || len < kHeader + 4 || std::memcmp(p, kMagic, 4) != 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "not a feed state ({} bytes, no 'A2FS' magic)", len);
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
  const bool shuffle = flags & kFlagShuffle;
  const uint32_t rows_crc = le::load<uint32_t>(p + 12);
  const uint64_t rows = le::load<uint64_t>(p + 16);
  if (rows != ds_->rows() || rows_crc != rows_crc_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed state was taken over another dataset ({} rows, CRC32C {:08x}); {} has {} rows, "
         "CRC32C {:08x}",
         rows, rows_crc, ds_->dir(), ds_->rows(), rows_crc_);
  if (bool(flags & kFlagMix) != bool(mix_))
    fail(A2PACK_E_INVALID_ARGUMENT, "feed state was taken from a feed over {}; this feed is over {}",
         flags & kFlagMix ? "a mixing sampler" : "an epoch sampler",
         mix_ ? "a mixing sampler" : "an epoch sampler");
  if (mix_) {
    // The mix adopts the state's seed and weights.
    change_mix([&](dataset::MixSampler& m) { return m.load_state(p + kHeader, inner_len); });
    return;
  }
  if (shuffle != o_.shuffle)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed state was taken with shuffle {}; this feed has shuffle {}",
         shuffle ? "on" : "off", o_.shuffle ? "on" : "off");
  // Checked (and the permutation of its epoch made) before anything changes.
  auto s = std::make_shared<dataset::Sampler>(*base_);
  const uint64_t next = s->load_state(p + kHeader, inner_len);  // as base_: no permutation
  auto base = std::make_unique<dataset::Sampler>(*s);  // the state's seed for later epochs
  if (o_.shuffle) s->set_epoch(s->epoch());
  stop();
  base_ = std::move(base);
  {
    std::lock_guard<std::mutex> lk(epoch_mu_);
    epochs_.assign(1, s);
    building_.clear();
  }
  begin(s->epoch(), next, s);
}

void Feed::set_weights(const std::vector<double>& weights) {
  if (stamp_.forked())
    fail(A2PACK_E_CLOSED, "feed: this process was forked from the one that opened the feed; "
         "open a new feed in this process");
  if (!mix_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: set_weights needs a feed over a mixing sampler; this one is over an epoch sampler");
  uint64_t from;
  {
    std::lock_guard<std::mutex> lk(ring_->mu);
    from = position(consumed_).batch;
  }
  change_mix([&](dataset::MixSampler& m) {
    m.set_weights(weights, from);
    return from;
  });
}

void Feed::change_mix(const std::function<uint64_t(dataset::MixSampler&)>& change) {
  // On a copy first: a change the mix refuses (it throws) leaves the feed as it was.
  std::unique_ptr<dataset::MixSampler> m;
  {
    std::lock_guard<std::mutex> lk(mix_mu_);
    m = std::make_unique<dataset::MixSampler>(*mix_);
  }
  const uint64_t next = change(*m);
  stop();
  {
    std::lock_guard<std::mutex> lk(mix_mu_);
    mix_ = std::move(m);
  }
  begin(0, next, nullptr);
}

}  // namespace a2pack::feed
