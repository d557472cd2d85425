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

std::shared_ptr<const ShardCache::Layout> layout_of(Manifest m) {
  auto l = std::make_shared<ShardCache::Layout>();
  for (const auto& r : m.shards) {
    l->firsts.push_back(r.first_row);
    l->max_shard_bytes = std::max(l->max_shard_bytes, r.rows * kRowBytes);
  }
  l->manifest = std::move(m);
  return l;
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
  auto l = layout_of(std::move(*m));
  if (o.budget_bytes < 2 * l->max_shard_bytes)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: a memory budget of {} bytes cannot hold two of its largest shard ({} bytes): a "
         "batch that crosses into the next window needs both, and the next window loads while "
         "the current one is read. Raise the budget, or build the dataset with smaller shards "
         "(--shard-rows)",
         dir, o.budget_bytes, l->max_shard_bytes);
  return std::unique_ptr<ShardCache>(new ShardCache(dir, std::move(l), o));
}

ShardCache::ShardCache(std::string dir, std::shared_ptr<const Layout> layout,
                       const ShardCacheOptions& o)
    : dir_(std::move(dir)), o_(o), layout_(std::move(layout)) {
  rows_.store(layout_->manifest.rows, std::memory_order_release);
  res_.resize(layout_->shards());
  wanted_.assign(layout_->shards(), 0);
  owner_pid_ = static_cast<long>(::getpid());
  if (o_.prefetch) loader_ = std::make_unique<std::thread>([this] { loader_loop(); });
}

std::shared_ptr<const ShardCache::Layout> ShardCache::layout() const {
  std::lock_guard<std::mutex> lk(mu_);
  return layout_;
}

bool ShardCache::grow(Manifest next, uint32_t window) {
  check_process();
  const std::shared_ptr<const Layout> old = layout();
  const Manifest& m = old->manifest;
  if (!next.sharded)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}/manifest.json: the sharded dataset was replaced by a single-file one", dir_);
  if (next.shards.size() < m.shards.size() || next.rows < m.rows)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}/manifest.json: lists {} shards of {} rows now, fewer than the {} shards of {} rows "
         "read so far; the dataset was rebuilt or replaced (shards are followed as they are "
         "appended)",
         dir_, next.shards.size(), next.rows, m.shards.size(), m.rows);
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ShardRecord &a = m.shards[i], &b = next.shards[i];
    if (a.file != b.file || a.first_row != b.first_row || a.rows != b.rows ||
        a.crc32c != b.crc32c)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "{}/manifest.json: shard {} is {} ({} rows from row {}, CRC32C {:08x}) now, where it "
           "was {} ({} rows from row {}, CRC32C {:08x}); the dataset was rebuilt or replaced "
           "(shards are followed as they are appended)",
           dir_, i, b.file, b.rows, b.first_row, b.crc32c, a.file, a.rows, a.first_row,
           a.crc32c);
  }
  if (next.shards.size() == m.shards.size()) return false;
  // read_manifest has checked that the shards follow each other and add up
  // to the manifest's rows; their CRCs are checked here.
  check_combined_crc(dir_, next);
  auto l = layout_of(std::move(next));
  if (o_.budget_bytes < 2 * uint64_t{window} * l->max_shard_bytes)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: an appended shard of {} bytes: windows of {} shards of it need a budget of {} "
         "bytes, and the budget is {} (reopen the feed with a larger budget)",
         dir_, l->max_shard_bytes, window, 2 * uint64_t{window} * l->max_shard_bytes,
         o_.budget_bytes);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (layout_ != old)
      fail(A2PACK_E_INTERNAL, "{}: the shards were grown by two threads at once", dir_);
    res_.resize(l->shards());
    wanted_.resize(l->shards(), 0);
    rows_.store(l->manifest.rows, std::memory_order_release);
    layout_ = std::move(l);
  }
  return true;
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
  const uint64_t max_bytes = max_shard_bytes();
  const uint64_t fit = o_.budget_bytes / (2 * max_bytes);
  if (requested && requested > fit)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: windows of {} shards need a budget of {} bytes (two windows of its largest shard, "
         "{} bytes); the budget is {}",
         dir_, requested, 2 * uint64_t{requested} * max_bytes, max_bytes,
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
  const ShardRecord rec = layout_->manifest.shards[s];  // a copy: the layout may grow unlocked
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
    } else if (make_room(layout_->manifest.shards[s].rows * kRowBytes, false)) {
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
  const std::shared_ptr<const Layout> l = layout();
  const std::vector<uint64_t>& firsts = l->firsts;
  // Each row's shard, then the rows shard by shard (one pin at a time).
  thread_local std::vector<uint32_t> shard, order;
  thread_local std::vector<size_t> count;
  shard.resize(n);
  const uint64_t rows = l->manifest.rows;
  for (size_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || static_cast<uint64_t>(idx[i]) >= rows)
      fail(A2PACK_E_OUT_OF_RANGE, "{}: row {} (position {} of the batch) is outside the {} rows",
           dir_, idx[i], i, rows);
    shard[i] = static_cast<uint32_t>(
        std::upper_bound(firsts.begin(), firsts.end(), static_cast<uint64_t>(idx[i])) -
        firsts.begin() - 1);
  }
  // A counting sort of the positions by shard.
  count.assign(l->shards() + 1, 0);
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
    const uint64_t first = firsts[s];
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

void ShardCache::shards_of(const Layout& l, const std::vector<RowSpanRef>& spans,
                           std::vector<uint32_t>* out) {
  const std::vector<uint64_t>& f = l.firsts;
  for (const auto& sp : spans) {
    if (sp.count == 0) continue;
    size_t s = static_cast<size_t>(std::upper_bound(f.begin(), f.end(), sp.first) - f.begin() - 1);
    for (; s < l.shards() && f[s] < sp.first + sp.count; ++s)
      out->push_back(static_cast<uint32_t>(s));
  }
}

void ShardCache::want(const std::vector<RowSpanRef>& now,
                      const std::vector<RowSpanRef>& next) const {
  std::vector<uint32_t> a, b;
  const std::shared_ptr<const Layout> l = layout();
  shards_of(*l, now, &a);
  shards_of(*l, next, &b);
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
    if (!make_room(layout_->manifest.shards[s].rows * kRowBytes, true)) {
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
