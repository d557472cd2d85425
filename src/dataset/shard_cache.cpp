#include "dataset/shard_cache.hpp"

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

}  // namespace

std::unique_ptr<ShardCache> ShardCache::open(const std::string& dir_in,
                                             const ShardCacheOptions& o) {
  const std::string dir = strip_slashes(dir_in);
  auto m = read_manifest(dir);
  if (!m)
    fail(A2PACK_E_NOT_FOUND,
         "{}/manifest.json: missing; shards are read from datasets a2pack committed (`a2pack "
         "dataset verify --repair` gives an upstream dataset one)",
         dir);
  if (!m->sharded)  // a single-file dataset is one shard
    m->shards = {ShardRecord{"steps.npy", 0, m->rows, m->runs, m->steps_crc32c}};
  if (m->rows == 0) fail(A2PACK_E_INVALID_ARGUMENT, "{}: holds no rows to read", dir);
  uint64_t max_bytes = 0;
  for (const auto& r : m->shards) max_bytes = std::max(max_bytes, r.rows * kRowBytes);
  if (o.budget_bytes < 2 * max_bytes)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: a memory budget of {} bytes cannot hold two of its largest shard ({} bytes): a "
         "batch that crosses into the next window needs both, and the next window loads while "
         "the current one is read. Raise the budget, or build the dataset with smaller shards "
         "(--shard-rows)",
         dir, o.budget_bytes, max_bytes);
  std::unique_ptr<ShardCache> c(new ShardCache(dir, std::move(*m), o));
  c->max_shard_bytes_ = max_bytes;
  return c;
}

ShardCache::ShardCache(std::string dir, Manifest m, const ShardCacheOptions& o)
    : dir_(std::move(dir)), m_(std::move(m)), o_(o) {
  res_.resize(m_.shards.size());
  wanted_.assign(m_.shards.size(), 0);
  for (const auto& r : m_.shards) firsts_.push_back(r.first_row);
  owner_pid_ = static_cast<long>(::getpid());
  if (o_.prefetch) loader_ = std::make_unique<std::thread>([this] { loader_loop(); });
}

ShardCache::~ShardCache() {
  if (static_cast<long>(::getpid()) != owner_pid_) {
    // A forked child: the loader thread and whatever held the mutex at the
    // fork are the parent's; leave both alone.
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

void ShardCache::check_process() const {
  if (static_cast<long>(::getpid()) != owner_pid_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: these shards were opened by process {}; a forked process cannot read them (the "
         "loader thread is not there): open them again in this process",
         dir_, owner_pid_);
}

uint32_t ShardCache::window_for(uint32_t requested) const {
  const uint64_t fit = o_.budget_bytes / (2 * max_shard_bytes_);
  if (requested && requested > fit)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: windows of {} shards need a budget of {} bytes (two windows of its largest shard, "
         "{} bytes); the budget is {}",
         dir_, requested, 2 * uint64_t{requested} * max_shard_bytes_, max_shard_bytes_,
         o_.budget_bytes);
  return requested ? requested : static_cast<uint32_t>(std::clamp<uint64_t>(fit, 1, UINT32_MAX));
}

bool ShardCache::make_room(uint64_t bytes, bool spare_wanted) const {
  while (resident_bytes_ + bytes > o_.budget_bytes) {
    size_t victim = SIZE_MAX;
    bool victim_wanted = true;
    for (size_t i = 0; i < res_.size(); ++i) {
      const Resident* r = res_[i].get();
      if (!r || !r->ready || r->pins) continue;
      const bool w = wanted_[i] != 0;
      if (spare_wanted && w) continue;
      // Unwanted before wanted, then the least recently used.
      if (victim == SIZE_MAX || (victim_wanted && !w) ||
          (victim_wanted == w && r->last_use < res_[victim]->last_use)) {
        victim = i;
        victim_wanted = w;
      }
    }
    if (victim == SIZE_MAX) return false;
    resident_bytes_ -= res_[victim]->mem.size();
    res_[victim].reset();
    ++st_.evictions;
  }
  return true;
}

void ShardCache::load(uint32_t s, std::unique_lock<std::mutex>& lk) const {
  const ShardRecord& rec = m_.shards[s];
  const uint64_t bytes = rec.rows * kRowBytes;
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

const uint8_t* ShardCache::pin(uint32_t s) const {
  std::unique_lock<std::mutex> lk(mu_);
  const auto t0 = std::chrono::steady_clock::now();
  bool waited = false;
  for (;;) {
    Resident* r = res_[s].get();
    if (r && r->ready) {
      ++r->pins;
      r->last_use = ++clock_;
      if (waited) st_.load_wait_s += seconds_since(t0);
      return r->mem.data();
    }
    waited = true;
    if (r) {
      cv_->wait(lk);  // being loaded
    } else if (make_room(m_.shards[s].rows * kRowBytes, false)) {
      load(s, lk);
    } else {
      // Every resident shard is pinned by a gather copying from it (none
      // of them waits while pinning): one is let go within a copy's time.
      cv_->wait(lk);
    }
  }
}

void ShardCache::unpin(uint32_t s) const {
  {
    std::lock_guard<std::mutex> lk(mu_);
    --res_[s]->pins;
  }
  cv_->notify_all();
}

void ShardCache::gather_columns(const int64_t* idx, size_t n, const ColumnsOut& out) const {
  check_process();
  // Each row's shard, then the rows shard by shard (one pin at a time).
  thread_local std::vector<uint32_t> shard, order;
  thread_local std::vector<size_t> count;
  shard.resize(n);
  const uint64_t rows = m_.rows;
  for (size_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || static_cast<uint64_t>(idx[i]) >= rows)
      fail(A2PACK_E_OUT_OF_RANGE, "{}: row {} (position {} of the batch) is outside the {} rows",
           dir_, idx[i], i, rows);
    shard[i] = static_cast<uint32_t>(
        std::upper_bound(firsts_.begin(), firsts_.end(), static_cast<uint64_t>(idx[i])) -
        firsts_.begin() - 1);
  }
  // A counting sort of the positions by shard.
  count.assign(m_.shards.size() + 1, 0);
  for (size_t i = 0; i < n; ++i) ++count[shard[i] + 1];
  for (size_t s = 1; s < count.size(); ++s) count[s] += count[s - 1];
  order.resize(n);
  {
    std::vector<size_t> at(count.begin(), count.end() - 1);
    for (size_t i = 0; i < n; ++i) order[at[shard[i]]++] = static_cast<uint32_t>(i);
  }
  for (size_t s = 0; s + 1 < count.size(); ++s) {
    const size_t a = count[s], b = count[s + 1];
    if (a == b) continue;
    const uint8_t* base = pin(static_cast<uint32_t>(s));
    const uint64_t first = firsts_[s];
    auto row = [&](size_t k) {
      return base + (static_cast<uint64_t>(idx[order[k]]) - first) * kRowBytes;
    };
    for (size_t k = a; k < std::min(b, a + kPrefetchAhead); ++k) __builtin_prefetch(row(k), 0, 2);
    for (size_t k = a; k < b; ++k) {
      if (k + kPrefetchAhead < b) __builtin_prefetch(row(k + kPrefetchAhead), 0, 2);
      emit_columns(order[k], row(k), out);
    }
    unpin(static_cast<uint32_t>(s));
  }
}

void ShardCache::shards_of(const std::vector<RowSpanRef>& spans,
                           std::vector<uint32_t>* out) const {
  for (const auto& sp : spans) {
    if (sp.count == 0) continue;
    size_t s = static_cast<size_t>(
        std::upper_bound(firsts_.begin(), firsts_.end(), sp.first) - firsts_.begin() - 1);
    for (; s < m_.shards.size() && firsts_[s] < sp.first + sp.count; ++s)
      out->push_back(static_cast<uint32_t>(s));
  }
}

void ShardCache::want(const std::vector<RowSpanRef>& now,
                      const std::vector<RowSpanRef>& next) const {
  std::vector<uint32_t> a, b;
  shards_of(now, &a);
  shards_of(next, &b);
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Most batches of a window wish what the one before did: nothing to redo.
    if (a == wished_now_ && b == wished_next_) return;
    wished_now_ = a;
    wished_next_ = b;
    std::fill(wanted_.begin(), wanted_.end(), 0);
    for (uint32_t s : a) wanted_[s] = 1;
    for (uint32_t s : b) wanted_[s] = 1;
    queue_.clear();
    for (uint32_t s : b)
      if (!res_[s]) queue_.push_back(s);
  }
  if (!b.empty()) cv_->notify_all();
}

void ShardCache::loader_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      cv_->wait(lk);
      continue;
    }
    const uint32_t s = queue_.front();
    if (res_[s] || !wanted_[s]) {
      queue_.pop_front();
      continue;
    }
    // Ahead of need: only into room that costs no shard still wanted; else
    // try again when a gather lets one go.
    if (!make_room(m_.shards[s].rows * kRowBytes, true)) {
      cv_->wait(lk);
      continue;
    }
    queue_.pop_front();
    try {
      load(s, lk);
    } catch (const std::exception&) {
      // The gather that needs it loads it itself, and reports the error.
      if (!lk.owns_lock()) lk.lock();
    }
  }
}

ShardCacheStats ShardCache::stats() const {
  check_process();
  std::lock_guard<std::mutex> lk(mu_);
  ShardCacheStats s = st_;
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
