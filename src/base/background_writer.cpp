#include "base/background_writer.hpp"


#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "base/file_io.hpp"

namespace a2pack {

BackgroundWriter::BackgroundWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
  for (size_t i = 0; i < kBuffers; ++i) {
    auto b = std::make_unique<Buffer>();
    b->data.reset(new uint8_t[kBufferBytes]);
    free_.push_back(std::move(b));
  }
  fill_ = std::move(free_.back());
  free_.pop_back();
  thread_ = std::thread([this] { run(); });
}

BackgroundWriter::~BackgroundWriter() {
  try {
    if (fill_ && fill_->len) hand_off();
  } catch (...) {
    // Destruction cannot report; drain() would have.
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  thread_.join();
}

void BackgroundWriter::rethrow_locked() { std::rethrow_exception(error_); }

void BackgroundWriter::hand_off() {
  std::unique_lock<std::mutex> lk(mu_);
  if (failed_) rethrow_locked();
  queue_.push_back(std::move(fill_));
  work_cv_.notify_one();
  // The thread returns every buffer, written or not (after an error it
  // skips them), so this wait ends and fill_ is always valid afterwards.
  done_cv_.wait(lk, [&] { return !free_.empty(); });
  fill_ = std::move(free_.back());
  free_.pop_back();
  fill_->len = 0;
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
  if (fill_->len) hand_off();
  std::unique_lock<std::mutex> lk(mu_);
  done_cv_.wait(lk, [&] { return (queue_.empty() && !writing_) || failed_; });
  if (failed_) rethrow_locked();
}

void BackgroundWriter::discard() {
  std::lock_guard<std::mutex> lk(mu_);
  discard_ = true;
  fill_->len = 0;
  for (auto& b : queue_) {
    b->len = 0;
    free_.push_back(std::move(b));
  }
  queue_.clear();
  done_cv_.notify_all();
}

void BackgroundWriter::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    std::unique_ptr<Buffer> b = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    // After an error nothing more is written: later bytes would leave a
    // hole. The buffers still cycle so callers wake and see the error.
    const bool skip = discard_ || failed_;
    lk.unlock();
    std::exception_ptr err;
    if (!skip) {
      try {
        write_all(fd_, b->data.get(), b->len, path_);
      } catch (...) {
        err = std::current_exception();
      }
    }
    lk.lock();
    if (err && !failed_) {
      error_ = err;
      failed_ = true;
    }
    b->len = 0;
    free_.push_back(std::move(b));
    writing_ = false;
    done_cv_.notify_all();
  }
}

}  // namespace a2pack
