#include "base/background_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <new>

#include "base/error.hpp"
#include "base/file_io.hpp"

namespace a2pack {

namespace {
// O_DIRECT wants memory, offsets and lengths aligned to the device's logical
// block; 4 KiB covers every common one.
constexpr size_t kDirectAlign = 4096;
static_assert(BackgroundWriter::kBufferBytes % kDirectAlign == 0);

}  // namespace

BackgroundWriter::BackgroundWriter(int fd, std::string path, bool direct, uint64_t direct_from)
    : fd_(fd), path_choice_(direct_from), path_(std::move(path)) {
  for (size_t i = 0; i < kBuffers; ++i) {
    auto b = std::make_unique<Buffer>();
    b->data.reset(static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, kBufferBytes)));
    if (!b->data) throw std::bad_alloc();
    free_.push_back(std::move(b));
  }
  fill_ = std::move(free_.back());
  free_.pop_back();
  // A filesystem without O_DIRECT (EINVAL) keeps everything buffered.
  if (direct) {
    direct_fd_owned_ = reopen(fd_, O_WRONLY | O_DIRECT, path_);
    direct_fd_ = direct_fd_owned_;
  }
  if (direct_fd_owned_ >= 0) {
    ring_ = DirectRing::open(kDirectDepth);
    two_lanes_ = ring_ != nullptr;
  }
  thread_ = std::thread([this] { run(); });
  if (two_lanes_) {
    try {
      direct_thread_ = std::thread([this] { run_direct(); });
    } catch (...) {
      two_lanes_ = false;  // no second thread: one lane does it all
    }
  }
}

BackgroundWriter::~BackgroundWriter() {
  try {
    if (fill_ && fill_->len > fill_on_disk_) hand_off();
  } catch (...) {
    // Destruction cannot report; drain() would have.
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
  if (direct_thread_.joinable()) direct_thread_.join();
  ring_.reset();
  if (direct_fd_owned_ >= 0) ::close(direct_fd_owned_);
}

void BackgroundWriter::rethrow_locked() { std::rethrow_exception(error_); }

void BackgroundWriter::keep_error_locked(std::exception_ptr err) {
  if (!failed_) {
    error_ = std::move(err);
    failed_ = true;
  }
}

void BackgroundWriter::hand_off() {
  std::unique_lock<std::mutex> lk(mu_);
  if (failed_) rethrow_locked();
  const uint64_t next = fill_->offset + fill_->len;
  queue_.push_back(std::move(fill_));
  work_cv_.notify_all();
  // The thread returns every buffer, written or not (after an error it
  // skips them), so this wait ends and fill_ is always valid afterwards.
  done_cv_.wait(lk, [&] { return !free_.empty(); });
  fill_ = std::move(free_.back());
  free_.pop_back();
  fill_->len = 0;
  fill_->offset = next;
  fill_on_disk_ = 0;
  if (failed_) rethrow_locked();
}

void BackgroundWriter::write(const void* data, size_t len) {
  if (failed_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lk(mu_);
    rethrow_locked();
  }
  const auto* p = static_cast<const uint8_t*>(data);
  while (len) {
    size_t n = std::min(len, kBufferBytes - fill_->len);
    std::memcpy(fill_->data.get() + fill_->len, p, n);
    fill_->len += n;
    p += n;
    len -= n;
    if (fill_->len == kBufferBytes) hand_off();
  }
}

void BackgroundWriter::drain() {
  // Buffered mode hands the partial buffer to the thread. Direct mode keeps
  // it (the next bytes must land in the same aligned buffer) and writes its
  // new part through the page cache from here, once the queue is empty.
  const bool keep_fill = direct();
  if (!keep_fill && fill_->len) hand_off();
  std::unique_lock<std::mutex> lk(mu_);
  done_cv_.wait(lk, [&] { return (queue_.empty() && in_flight_ == 0) || failed_; });
  if (failed_) rethrow_locked();
  lk.unlock();
  try {
    if (keep_fill && fill_->len > fill_on_disk_) {
      pwrite_all(fd_, fill_->data.get() + fill_on_disk_, fill_->len - fill_on_disk_,
                 fill_->offset + fill_on_disk_, path_);
      fill_on_disk_ = fill_->len;
    }
    trim_extension();
  } catch (...) {
    lk.lock();
    keep_error_locked(std::current_exception());
    throw;
  }
}

void BackgroundWriter::trim_extension() {
  // Both lanes are idle: the file ends where the bytes written end.
  const uint64_t end = fill_->offset + fill_->len;
  if (extended_to_ <= end) return;
  int rc;
  do rc = ::ftruncate(fd_, static_cast<off_t>(end));
  while (rc < 0 && errno == EINTR);
  if (rc < 0) fail_errno("truncate", path_, errno);
  extended_to_ = end;
}

void BackgroundWriter::patch(const void* data, size_t len, uint64_t offset) {
  drain();
  // The kept partial buffer will be written again: it must carry the patch.
  const uint64_t a = std::max<uint64_t>(offset, fill_->offset);
  const uint64_t b = std::min<uint64_t>(offset + len, fill_->offset + fill_->len);
  if (a < b)
    std::memcpy(fill_->data.get() + (a - fill_->offset),
                static_cast<const uint8_t*>(data) + (a - offset), b - a);
  pwrite_all(fd_, data, len, offset, path_);
}

void BackgroundWriter::discard() {
  std::lock_guard<std::mutex> lk(mu_);
  discard_ = true;
  fill_->len = 0;
  fill_on_disk_ = 0;
  for (auto& b : queue_) {
    b->len = 0;
    free_.push_back(std::move(b));
  }
  queue_.clear();
  done_cv_.notify_all();
}

void BackgroundWriter::write_cached(const Buffer& b, size_t from) const {
  pwrite_all(fd_, b.data.get() + from, b.len - from, b.offset + from, path_);
}

void BackgroundWriter::put(const Buffer& b) {
  const uint8_t* p = b.data.get();
  size_t done = 0;
  const int d = direct_fd_.load();
  // With two lanes this one only goes through the page cache; alone, it
  // times whole buffers for the chooser.
  const bool chosen = d >= 0 && b.len == kBufferBytes && !two_lanes_.load();
  const bool direct = chosen && path_choice_.direct_for(b.offset);
  const auto t0 = chosen ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (direct) {
    // One O_DIRECT write of the whole buffer; whatever it leaves (a short
    // write, an error) goes through the page cache below, where pwrite_all
    // retries and reports the error naming the file.
    ssize_t n;
    do n = ::pwrite(d, p, b.len, static_cast<off_t>(b.offset));
    while (n < 0 && errno == EINTR);
    if (n > 0) done = static_cast<size_t>(n);
    else if (n < 0 && errno == EINVAL) {
      // Refused at write time (an unaligned device, a filesystem that
      // accepts the flag only at open): buffered from here on (the
      // descriptor is closed with the writer).
      direct_fd_.store(-1);
    }
  }
  const bool went_direct = done == b.len;
  write_cached(b, done);
  if (chosen && (went_direct || !direct)) {
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    path_choice_.took(direct, ns);
  }
}

bool BackgroundWriter::takes_locked(Lane lane, const Buffer& b) const {
  // The direct lane takes whole buffers while O_DIRECT works; the
  // page-cache lane everything else, and whole buffers only before
  // direct_from_ (past it the page cache would throttle to the disk).
  const bool direct_ok = two_lanes_.load() && direct_fd_.load() >= 0 && b.len == kBufferBytes;
  return lane == Lane::direct ? direct_ok : !direct_ok || b.offset < path_choice_.direct_from();
}

std::unique_ptr<BackgroundWriter::Buffer> BackgroundWriter::take_locked() {
  std::unique_ptr<Buffer> b = std::move(queue_.front());
  queue_.pop_front();
  ++in_flight_;
  work_cv_.notify_all();  // the next buffer may be the other lane's
  return b;
}

void BackgroundWriter::give_back_locked(std::unique_ptr<Buffer> b, std::exception_ptr err) {
  if (err) keep_error_locked(err);
  b->len = 0;
  free_.push_back(std::move(b));
  --in_flight_;
  done_cv_.notify_all();
}

void BackgroundWriter::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [&] {
      return (stop_ && queue_.empty()) || (!queue_.empty() && takes_locked(Lane::cached, *queue_.front()));
    });
    if (queue_.empty()) return;  // stop_ and nothing left
    std::unique_ptr<Buffer> b = take_locked();
    // After an error nothing more is written: later bytes would leave a
    // hole. The buffers still cycle so callers wake and see the error.
    const bool skip = discard_ || failed_;
    lk.unlock();
    std::exception_ptr err;
    if (!skip) {
      try {
        put(*b);
      } catch (...) {
        err = std::current_exception();
      }
    }
    lk.lock();
    give_back_locked(std::move(b), err);
  }
}

void BackgroundWriter::wake_lanes() {
  // Taking the lock orders the change before any lane's next look at it:
  // a lane that found nothing to take is then already waiting for this.
  { std::lock_guard<std::mutex> lk(mu_); }
  work_cv_.notify_all();
}

bool BackgroundWriter::submit_direct(const Buffer& b, uint64_t tag) {
  // Within the file's size, so the write does not hold the inode's lock
  // until the disk has it (base/direct_ring.hpp). fallocate never shrinks
  // the file, whatever the other lane has written past it meanwhile.
  const uint64_t end = b.offset + b.len;
  if (end > extended_to_) {
    const uint64_t to = end + kExtendAhead;
    int rc;
    do rc = ::fallocate(fd_, 0, static_cast<off_t>(extended_to_), static_cast<off_t>(to - extended_to_));
    while (rc < 0 && errno == EINTR);
    if (rc < 0) {
      // Not supported here (or no space: the write below says so): one
      // lane from now on, this buffer written as that lane would.
      two_lanes_ = false;
      wake_lanes();
      write_cached(b, 0);
      return false;
    }
    extended_to_ = to;
  }
  if (ring_->write(direct_fd_.load(), b.data.get(), b.len, b.offset, tag)) return true;
  write_cached(b, 0);
  return false;
}

void BackgroundWriter::finish_direct(const Buffer& b, int64_t result) {
  if (result == static_cast<int64_t>(b.len)) return;
  if (result == -EINVAL) {
    // O_DIRECT refused at write time: the page cache takes everything now.
    direct_fd_.store(-1);
    wake_lanes();
  }
  // A short write or an error: the rest through the page cache, where
  // pwrite_all retries and reports the error naming the file.
  write_cached(b, result > 0 ? static_cast<size_t>(result) : 0);
}

void BackgroundWriter::run_direct() {
  std::unique_ptr<Buffer> slots[kDirectDepth];
  unsigned busy = 0;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    // Queue writes while there is room for them.
    while (busy < kDirectDepth && !queue_.empty() && takes_locked(Lane::direct, *queue_.front())) {
      std::unique_ptr<Buffer> b = take_locked();
      if (discard_ || failed_) {
        give_back_locked(std::move(b), nullptr);
        continue;
      }
      unsigned slot = 0;
      while (slots[slot]) ++slot;
      lk.unlock();
      std::exception_ptr err;
      bool queued = false;
      try {
        queued = submit_direct(*b, slot);
      } catch (...) {
        err = std::current_exception();
      }
      lk.lock();
      if (queued) {
        slots[slot] = std::move(b);
        ++busy;
      } else {
        give_back_locked(std::move(b), err);
      }
    }
    if (busy == 0) {
      if (stop_ && queue_.empty()) return;
      work_cv_.wait(lk, [&] {
        return (stop_ && queue_.empty()) || (!queue_.empty() && takes_locked(Lane::direct, *queue_.front()));
      });
      continue;
    }
    // Wait for a write in flight; new buffers wait for its slot.
    lk.unlock();
    std::exception_ptr err;
    DirectRing::Done done{};
    bool ring_failed = false;
    try {
      done = ring_->wait();
    } catch (...) {
      err = std::current_exception();
      ring_failed = true;
    }
    const unsigned slot = static_cast<unsigned>(done.tag);
    if (!ring_failed) {
      try {
        finish_direct(*slots[slot], done.result);
      } catch (...) {
        err = std::current_exception();
      }
    }
    lk.lock();
    if (ring_failed) {
      // Nothing says which write ended: keep the error (the file is never
      // committed now) and leave the rest to the page-cache lane.
      keep_error_locked(err);
      two_lanes_ = false;
      work_cv_.notify_all();
      done_cv_.notify_all();
      return;
    }
    --busy;
    give_back_locked(std::move(slots[slot]), err);
  }
}

}  // namespace a2pack
