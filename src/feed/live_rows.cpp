#include "feed/live_rows.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "base/crc32c.hpp"
#include "base/error.hpp"

namespace a2pack::feed {

std::unique_ptr<LiveRows> LiveRows::of_dataset(std::shared_ptr<const dataset::Dataset> ds,
                                               const dataset::OpenOptions& reopen, bool runs) {
  const std::string dir = ds->dir();
  if (!ds->manifest())
    fail(A2PACK_E_UNSUPPORTED,
         "feed: {}: live follows a dataset's commits through its manifest.json, and this one "
         "has none (a dataset of the upstream tool); `a2pack dataset verify --repair` writes it",
         dir);
  if (ds->manifest()->sharded || !ds->data())
    fail(A2PACK_E_UNSUPPORTED,
         "feed: {}: live follows an opened dataset's single steps.npy; a sharded dataset is "
         "followed by the feed over its folder (Feed(path, live=True))",
         dir);
  // The rows the feed reads: only the helper thread touches it, one read at a time.
  auto last = std::make_shared<std::shared_ptr<const dataset::Dataset>>(std::move(ds));
  return std::unique_ptr<LiveRows>(new LiveRows(dir, [dir, reopen, runs, last] {
    const std::shared_ptr<const dataset::Dataset> old = *last;
    std::shared_ptr<const dataset::Dataset> ds = dataset::Dataset::open(dir, reopen);
    const uint64_t n = old->rows();
    if (ds->rows() < n)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "feed: {}: the dataset holds {} rows now, fewer than the {} the live feed reads; it "
           "was rebuilt or replaced (a live feed follows appends only)",
           dir, ds->rows(), n);
    // The rows read so far must still be the first rows: the old manifest's
    // CRC32C of them against the new file's.
    const uint32_t want = old->manifest()->steps_crc32c;
    if (ds->rows() > n && old->manifest()->rows == n &&
        crc32c::compute(ds->data(), static_cast<size_t>(n * 32)) != want)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "feed: {}: its first {} rows changed (CRC32C {:08x} before); it was rebuilt or "
           "replaced (a live feed follows appends only)",
           dir, n, want);
    if (ds->rows() == n) return std::optional<Grown>{};
    *last = ds;
    return std::optional<Grown>{Grown{ds->rows(), ds, runs ? ds->select("", {}) : dataset::Ranges{}}};
  }));
}

std::unique_ptr<LiveRows> LiveRows::of_shards(std::shared_ptr<dataset::ShardCache> shards,
                                              uint32_t window) {
  const std::string dir = shards->dir();
  if (!shards->layout()->manifest.sharded)
    fail(A2PACK_E_UNSUPPORTED,
         "feed: {}: live over a dataset's folder follows a sharded dataset's new shards; this "
         "one keeps its rows in one steps.npy: open it (Feed(a2pack.open(path), live=True))",
         dir);
  return std::unique_ptr<LiveRows>(new LiveRows(dir, [dir, shards, window] {
    std::optional<dataset::Manifest> m = dataset::read_manifest(dir);
    if (!m)
      fail(A2PACK_E_NOT_FOUND, "feed: {}/manifest.json: gone; the dataset was removed", dir);
    if (!shards->grow(std::move(*m), window)) return std::optional<Grown>{};
    return std::optional<Grown>{Grown{shards->rows(), nullptr, {}}};
  }));
}

LiveRows::LiveRows(std::string dir, Read read)
    : dir_(std::move(dir)), manifest_(dir_ + "/manifest.json"), read_(std::move(read)) {
  seen_ = stamp();
}

LiveRows::~LiveRows() {
  if (helper_.joinable()) helper_.join();
}

LiveRows::Stamp LiveRows::stamp() const {
  struct stat st;
  Stamp s;
  if (::stat(manifest_.c_str(), &st) != 0) return s;  // gone for now: looked at again next time
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = st.st_size;
  s.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  return s;
}

std::optional<LiveRows::Grown> LiveRows::poll() {
  if (busy_.load(std::memory_order_acquire)) return std::nullopt;
  std::optional<Grown> out;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    if (done_) {
      out = std::move(done_);
      done_.reset();
    }
  }
  if (out) return out;
  const Stamp now = stamp();
  if (!(now != seen_) || now.size < 0) return std::nullopt;
  seen_ = now;
  if (helper_.joinable()) helper_.join();  // finished: busy_ is false
  busy_.store(true, std::memory_order_release);
  try {
    helper_ = std::thread([this] { read_again(); });
  } catch (const std::system_error&) {
    busy_.store(false, std::memory_order_release);
    seen_ = Stamp{};  // no thread now: tried again at the next batch
  }
  return std::nullopt;
}

void LiveRows::settle() {
  if (!busy_.load(std::memory_order_acquire)) {
    bool pending;
    {
      std::lock_guard<std::mutex> lk(mu_);
      pending = done_.has_value() || error_ != nullptr;
    }
    if (!pending) poll();  // starts a read when the manifest changed
  }
  if (helper_.joinable()) helper_.join();
}

void LiveRows::read_again() {
  std::optional<Grown> g;
  std::exception_ptr err;
  try {
    g = read_();
  } catch (...) {
    err = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (g) done_ = std::move(g);
    if (err) error_ = err;
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace a2pack::feed
