#include "feed/live_rows.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "base/crc32c.hpp"
#include "base/error.hpp"

namespace a2pack::feed {

LiveRows::LiveRows(std::shared_ptr<const dataset::Dataset> ds, const dataset::OpenOptions& reopen,
                   bool runs)
    : dir_(ds->dir()), manifest_(ds->dir() + "/manifest.json"), reopen_(reopen), runs_(runs),
      last_(std::move(ds)) {
  if (!last_->manifest())
    fail(A2PACK_E_UNSUPPORTED,
         "feed: {}: live follows a dataset's commits through its manifest.json, and this one "
         "has none (a dataset of the upstream tool); `a2pack dataset verify --repair` writes it",
         dir_);
  if (last_->manifest()->sharded || !last_->data())
    fail(A2PACK_E_UNSUPPORTED,
         "feed: {}: live follows a single-file dataset (steps.npy); a sharded dataset is read "
         "by its shards' block order, which does not follow appends yet",
         dir_);
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
      last_ = out->ds;
    }
  }
  if (out) return out;
  const Stamp now = stamp();
  if (!(now != seen_) || now.size < 0) return std::nullopt;
  seen_ = now;
  if (helper_.joinable()) helper_.join();  // finished: busy_ is false
  busy_.store(true, std::memory_order_release);
  try {
    helper_ = std::thread([this] { open_again(); });
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
    if (!pending) poll();  // starts the open when the manifest changed
  }
  if (helper_.joinable()) helper_.join();
}

void LiveRows::open_again() {
  const std::shared_ptr<const dataset::Dataset> old = last_;
  std::optional<Grown> g;
  std::exception_ptr err;
  try {
    std::shared_ptr<const dataset::Dataset> ds = dataset::Dataset::open(dir_, reopen_);
    const uint64_t n = old->rows();
    if (ds->rows() < n)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "feed: {}: the dataset holds {} rows now, fewer than the {} the live feed reads; it "
           "was rebuilt or replaced (a live feed follows appends only)",
           dir_, ds->rows(), n);
    // The rows read so far must still be the first rows: the old manifest's
    // CRC32C of them against the new file's.
    const uint32_t want = old->manifest()->steps_crc32c;
    if (ds->rows() > n && old->manifest()->rows == n &&
        crc32c::compute(ds->data(), static_cast<size_t>(n * 32)) != want)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "feed: {}: its first {} rows changed (CRC32C {:08x} before); it was rebuilt or "
           "replaced (a live feed follows appends only)",
           dir_, n, want);
    if (ds->rows() > n) {
      g = Grown{ds, runs_ ? ds->select("", {}) : dataset::Ranges{}};
    }
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
