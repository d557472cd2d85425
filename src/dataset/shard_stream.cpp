#include "dataset/shard_stream.hpp"

#include <algorithm>
#include <chrono>

#include <unistd.h>

#include "base/error.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/shards.hpp"

namespace a2pack::dataset {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Window w's shards: plan positions [w * window, min(shards, (w + 1) * window)).
std::pair<size_t, size_t> window_span(const BlockPlan& p, size_t w, uint32_t window) {
  const size_t a = w * window;
  return {a, std::min(p.shards.size(), a + window)};
}

}  // namespace

std::unique_ptr<ShardStream> ShardStream::open(const std::string& dir_in,
                                               const ShardStreamOptions& o) {
  const std::string dir = strip_slashes(dir_in);
  auto m = read_manifest(dir);
  if (!m)
    fail(A2PACK_E_NOT_FOUND,
         "{}/manifest.json: missing; the shard stream reads datasets a2pack committed (`a2pack "
         "dataset verify --repair` gives an upstream dataset one)",
         dir);
  if (!m->sharded)  // a single-file dataset is one shard
    m->shards = {ShardRecord{"steps.npy", 0, m->rows, m->runs, m->steps_crc32c}};
  if (m->rows == 0) fail(A2PACK_E_INVALID_ARGUMENT, "{}: holds no rows to stream", dir);
  uint64_t max_bytes = 0;
  std::vector<uint64_t> rows, firsts;
  for (const auto& r : m->shards) {
    max_bytes = std::max(max_bytes, r.rows * kRowBytes);
    rows.push_back(r.rows);
    firsts.push_back(r.first_row);
  }
  if (o.budget_bytes < 2 * max_bytes)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: a memory budget of {} bytes cannot hold two of its largest shard ({} bytes): a "
         "batch that crosses into the next window needs both, and the next window loads while "
         "the current one is read. Raise the budget, or build the dataset with smaller shards "
         "(--shard-rows)",
         dir, o.budget_bytes, max_bytes);
  const uint64_t fit = o.budget_bytes / (2 * max_bytes);
  uint32_t window = o.window ? o.window
                             : static_cast<uint32_t>(std::clamp<uint64_t>(fit, 1, UINT32_MAX));
  if (o.window && o.window > fit)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: windows of {} shards need a budget of {} bytes (two windows of its largest shard, "
         "{} bytes); the budget is {}",
         dir, o.window, 2 * uint64_t{o.window} * max_bytes, max_bytes, o.budget_bytes);
  BlockSampler s(std::move(rows), std::move(firsts), o.seed, o.batch_size, o.rank, o.world, window,
                 o.drop_last);
  std::unique_ptr<ShardStream> st(new ShardStream(dir, std::move(*m), o, std::move(s)));
  st->max_shard_bytes_ = max_bytes;
  return st;
}

ShardStream::ShardStream(const std::string& dir, Manifest m, const ShardStreamOptions& o,
                         BlockSampler s)
    : dir_(dir), m_(std::move(m)), o_(o), sampler_(std::move(s)) {
  res_.resize(m_.shards.size());
  pinned_.assign(m_.shards.size(), 0);
  owner_pid_ = static_cast<long>(::getpid());
  start_epoch(0, m_.shards.size(), 0);
  if (o_.prefetch) loader_ = std::make_unique<std::thread>([this] { loader_loop(); });
}

ShardStream::~ShardStream() {
  if (static_cast<long>(::getpid()) != owner_pid_) {
    // A forked child: the loader thread and whatever held the mutex at the
    // fork are the parent's; leave both alone (the child's copy of the
    // memory goes with the child).
    (void)loader_.release();
    (void)cv_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_->notify_all();
  if (loader_) loader_->join();
}

void ShardStream::check_process() const {
  if (static_cast<long>(::getpid()) != owner_pid_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: this shard stream was opened by process {}; a forked process cannot use it (its "
         "loader thread is not there): open a stream in this process",
         dir_, owner_pid_);
}

void ShardStream::set_epoch(uint64_t e) {
  check_process();
  start_epoch(e, m_.shards.size(), 0);
}

void ShardStream::start_epoch(uint64_t e, size_t shards, uint64_t next_batch) {
  BlockPlan p = sampler_.plan(e, shards);
  BlockPlan np = sampler_.plan(e + 1);
  std::lock_guard<std::mutex> lk(mu_);
  plan_ = std::move(p);
  next_plan_ = std::move(np);
  plan_shards_ = shards;
  next_batch_ = next_batch;
  cur_window_ = SIZE_MAX;
  std::fill(pinned_.begin(), pinned_.end(), 0);
  queue_.clear();
  if (next_batch_ < plan_.batches) {
    cur_window_ = BlockSampler::window_of(plan_, next_batch_ * sampler_.batch_size());
    repin_locked();
  }
}

// Pin the current window's shards and its successor's (the next window of
// this epoch, or the next epoch's first), and queue the successor's for the
// loader; everything else may be evicted.
void ShardStream::repin_locked() {
  std::fill(pinned_.begin(), pinned_.end(), 0);
  auto [a, b] = window_span(plan_, cur_window_, sampler_.window());
  for (size_t j = a; j < b; ++j) {
    pinned_[plan_.shards[j]] = 1;
    if (!res_[plan_.shards[j]]) queue_.push_back(plan_.shards[j]);
  }
  const bool last = cur_window_ + 1 >= plan_.windows();
  const BlockPlan& sp = last ? next_plan_ : plan_;
  const size_t sw = last ? 0 : cur_window_ + 1;
  if (sw < sp.windows()) {
    auto [c, d] = window_span(sp, sw, sampler_.window());
    for (size_t j = c; j < d; ++j) {
      pinned_[sp.shards[j]] = 1;
      if (!res_[sp.shards[j]]) queue_.push_back(sp.shards[j]);
    }
    wanted_plan_ = sp;
    wanted_w_ = sw;
    want_order_ = true;
  }
  cv_->notify_all();
}

std::shared_ptr<const std::vector<uint32_t>> ShardStream::order(const BlockPlan& p, size_t w) {
  const WindowRef ref{p.epoch, p.shards.size(), w};
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& o : orders_)
      if (o.ref == ref && o.plan_rows == p.rows) return o.perm;
  }
  auto perm = std::make_shared<const std::vector<uint32_t>>(sampler_.window_order(p, w));
  std::lock_guard<std::mutex> lk(mu_);
  remember_order_locked(Order{ref, p.rows, perm});
  return perm;
}

void ShardStream::remember_order_locked(Order o) {
  for (const auto& x : orders_)
    if (x.ref == o.ref && x.plan_rows == o.plan_rows) return;
  orders_.push_back(std::move(o));
  if (orders_.size() > 3) orders_.erase(orders_.begin());
}

bool ShardStream::make_room(uint64_t bytes) {
  while (resident_bytes_ + bytes > o_.budget_bytes) {
    size_t victim = SIZE_MAX;
    for (size_t i = 0; i < res_.size(); ++i)
      if (res_[i] && res_[i]->ready && !pinned_[i] &&
          (victim == SIZE_MAX || res_[i]->last_use < res_[victim]->last_use))
        victim = i;
    if (victim == SIZE_MAX) return false;
    resident_bytes_ -= res_[victim]->mem.size();
    res_[victim].reset();
    ++st_.evictions;
  }
  return true;
}

void ShardStream::load(uint32_t s, std::unique_lock<std::mutex>& lk) {
  const ShardRecord& rec = m_.shards[s];
  const uint64_t bytes = rec.rows * kRowBytes;
  if (!make_room(bytes))
    fail(A2PACK_E_NO_MEMORY,
         "{}/{}: no room for its {} bytes within the budget of {} bytes (the shards in use hold "
         "{})",
         dir_, rec.file, bytes, o_.budget_bytes, resident_bytes_);
  res_[s] = std::make_unique<Resident>();
  Resident* r = res_[s].get();
  resident_bytes_ += bytes;
  lk.unlock();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    RowMemory mem(static_cast<size_t>(bytes), o_.huge_pages);
    read_shard(dir_, rec, mem.data(), o_.verify_crc);
    lk.lock();
    r->mem = std::move(mem);
    r->ready = true;
    r->last_use = ++clock_;
    ++st_.loads;
    st_.bytes_read += bytes;
    st_.load_s += seconds_since(t0);
  } catch (...) {
    if (!lk.owns_lock()) lk.lock();
    res_[s].reset();
    resident_bytes_ -= bytes;
    cv_->notify_all();
    throw;
  }
  cv_->notify_all();
}

const uint8_t* ShardStream::shard_data(uint32_t s) {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    Resident* r = res_[s].get();
    if (r && r->ready) {
      r->last_use = ++clock_;
      return r->mem.data();
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (r)
      cv_->wait(lk);  // the loader is reading it
    else
      load(s, lk);
    st_.load_wait_s += seconds_since(t0);
  }
}

void ShardStream::loader_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      if (want_order_) {
        // The successor window's order, so that entering it does not stall.
        want_order_ = false;
        BlockPlan p = wanted_plan_;
        const size_t w = wanted_w_;
        lk.unlock();
        auto perm = std::make_shared<const std::vector<uint32_t>>(sampler_.window_order(p, w));
        lk.lock();
        remember_order_locked(Order{WindowRef{p.epoch, p.shards.size(), w}, p.rows, perm});
        continue;
      }
      cv_->wait(lk);
      continue;
    }
    const uint32_t s = queue_.front();
    queue_.pop_front();
    if (res_[s] || !pinned_[s]) continue;
    try {
      load(s, lk);
    } catch (const std::exception&) {
      // The consumer loads it itself when it needs it, and reports the error.
      if (!lk.owns_lock()) lk.lock();
    }
  }
}

// Shard and row within it of pool position pp of window w (whose shards'
// first pool positions are starts[0..]).
size_t ShardStream::fill_rows(uint64_t a, uint64_t b, const uint8_t** ptrs, int64_t* idx,
                              bool load) {
  uint64_t pos = a;
  std::vector<uint64_t> starts;
  std::vector<const uint8_t*> bases;
  while (pos < b) {
    const size_t w = BlockSampler::window_of(plan_, pos);
    if (load && w != cur_window_) {
      // Entering a new window: its shards are pinned at once; the previous
      // window's stay pinned until this batch is gathered (repin() after).
      std::lock_guard<std::mutex> lk(mu_);
      cur_window_ = w;
      auto [c, d] = window_span(plan_, w, sampler_.window());
      for (size_t j = c; j < d; ++j) pinned_[plan_.shards[j]] = 1;
    }
    auto perm = order(plan_, w);
    auto [c, d] = window_span(plan_, w, sampler_.window());
    starts.assign(1, 0);
    bases.clear();
    for (size_t j = c; j < d; ++j) {
      const uint32_t s = plan_.shards[j];
      starts.push_back(starts.back() + m_.shards[s].rows);
      bases.push_back(load ? shard_data(s) : nullptr);
    }
    const uint64_t w0 = plan_.window_pos[w], end = std::min(b, plan_.window_pos[w + 1]);
    for (; pos < end; ++pos) {
      const uint64_t pp = (*perm)[pos - w0];
      const size_t j =
          static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), pp) - starts.begin()) - 1;
      const uint64_t local = pp - starts[j];
      const ShardRecord& r = m_.shards[plan_.shards[c + j]];
      if (ptrs) ptrs[pos - a] = bases[j] + local * kRowBytes;
      if (idx) idx[pos - a] = static_cast<int64_t>(r.first_row + local);
    }
  }
  return static_cast<size_t>(b - a);
}

size_t ShardStream::next(const ColumnsOut& out, int64_t* idx) {
  check_process();
  if (next_batch_ >= plan_.batches) {
    start_epoch(plan_.epoch + 1, m_.shards.size(), 0);
    return 0;
  }
  const uint64_t bs = sampler_.batch_size();
  const uint64_t a = next_batch_ * bs, b = std::min(a + bs, plan_.stream_end);
  ptrs_.resize(static_cast<size_t>(b - a));
  const size_t window_before = cur_window_;
  const size_t n = fill_rows(a, b, ptrs_.data(), idx, true);
  const size_t ahead = std::min(n, kPrefetchAhead);
  for (size_t i = 0; i < ahead; ++i) __builtin_prefetch(ptrs_[i], 0, 2);
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) __builtin_prefetch(ptrs_[i + kPrefetchAhead], 0, 2);
    emit_columns(i, ptrs_[i], out);
  }
  std::lock_guard<std::mutex> lk(mu_);
  ++next_batch_;
  ++st_.batches;
  // The pins change only when a batch entered another window (the previous
  // window stayed pinned while this batch was gathered from it).
  if (cur_window_ != window_before) repin_locked();
  return n;
}

size_t ShardStream::batch_indices(uint64_t b, int64_t* out) {
  if (b >= plan_.batches) return 0;
  const uint64_t bs = sampler_.batch_size();
  const uint64_t a = b * bs, e = std::min(a + bs, plan_.stream_end);
  return fill_rows(a, e, nullptr, out, false);
}

std::string ShardStream::save_state() const {
  return sampler_.save_state(plan_.epoch, next_batch_, plan_shards_);
}

void ShardStream::load_state(const void* data, size_t len) {
  check_process();
  const auto pos = sampler_.load_state(data, len);
  start_epoch(pos.epoch, pos.shards, pos.next_batch);
}

ShardStreamStats ShardStream::stats() const {
  check_process();
  std::lock_guard<std::mutex> lk(mu_);
  ShardStreamStats s = st_;
  s.resident_bytes = 0;
  s.resident_shards = 0;
  for (const auto& r : res_)
    if (r && r->ready) {
      s.resident_bytes += r->mem.size();
      ++s.resident_shards;
    }
  return s;
}

}  // namespace a2pack::dataset
