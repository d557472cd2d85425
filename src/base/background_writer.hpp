// Writing a file descriptor from a background thread.
//
// A writer fed many small records (a Python loop of bag writes) spends about
// as long in the kernel, copying into the page cache, as in its own work.
// Here write() copies into one of a few large buffers and returns; a thread
// writes the full buffers in order, so the kernel's copy overlaps the
// caller's next records instead of adding to them. Memory is bounded
// (kBuffers x kBufferBytes): write() waits while every buffer is in flight.
// The first write error is kept and thrown by every later write() or
// drain() once the thread has met it, naming the file, so nothing is lost
// silently; the caller's commit drains
// first, so a file never becomes visible with bytes missing.
// With `direct`, whole buffers may bypass the page cache (O_DIRECT on a
// second descriptor of the same file): on this project's VMs a buffered
// write of a multi-GB file ran at 430-500 MB/s once dirty pages were
// throttled, where O_DIRECT wrote 1.6-1.7 GB/s, and a durable commit's
// fsync then has almost nothing left to write. Past `direct_from` every
// whole buffer goes direct. Before it, where io_uring is available, two
// lanes take buffers from one queue as they free up: this thread through
// the page cache, a second one queuing O_DIRECT writes (two in flight,
// base/direct_ring.hpp) into space the file is extended to ahead of them
// (fallocate) and trimmed back from when drained; the page cache and the
// disk then take data at the same time. Without io_uring each buffer goes
// the way measured faster (base/write_path.hpp). Buffers are 4 KiB-aligned in memory and in
// the file (every one starts at a multiple of kBufferBytes); a partial
// buffer (drain) goes through the page cache and stays in place, to be
// written again, whole, by O_DIRECT once it fills. Where the filesystem
// refuses O_DIRECT (at open or at the first write) everything is buffered.
// Not for use across fork(): the thread exists only in the opening process.
#pragma once

#include <atomic>
#include <cstdlib>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/direct_ring.hpp"
#include "base/write_path.hpp"

namespace a2pack {

class BackgroundWriter {
 public:
  static constexpr size_t kBufferBytes = size_t{1} << 20;
  static constexpr size_t kBuffers = 8;
  static constexpr unsigned kDirectDepth = 2;          // O_DIRECT writes in flight
  static constexpr uint64_t kExtendAhead = 256u << 20;  // fallocate this far past a direct write

  // Writes go to `fd` (not owned; it must outlive this object) at offsets
  // from 0 on; `path` names it in errors and, with `direct`, is opened again
  // with O_DIRECT, used for the whole buffers at `direct_from` and past it
  // (before it, for those where O_DIRECT measured faster than the page
  // cache).
  BackgroundWriter(int fd, std::string path, bool direct = false, uint64_t direct_from = 0);
  // Waits for queued writes; their errors are dropped (drain() reports them).
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Queue a copy of [data, data + len); throws an earlier write's error.
  void write(const void* data, size_t len);
  // Return once every byte queued so far is written; throws the first error.
  void drain();
  // Drain, then overwrite [offset, offset + len) of what was written (a
  // header patched last).
  void patch(const void* data, size_t len, uint64_t offset);
  // Drop everything not yet written (the file is being abandoned); later
  // writes are dropped too.
  void discard();
  // Whether whole buffers still go around the page cache.
  bool direct() const { return direct_fd_.load() >= 0; }

 private:
  struct FreeAligned {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct Buffer {
    std::unique_ptr<uint8_t, FreeAligned> data;
    size_t len = 0;
    uint64_t offset = 0;  // where it goes in the file
  };
  enum class Lane { cached, direct };
  void hand_off();  // queue the fill buffer (lock not held)
  void run();         // the page-cache lane (or the only one)
  void run_direct();  // the io_uring O_DIRECT lane
  bool takes_locked(Lane lane, const Buffer& b) const;  // whether `lane` writes `b` (mu_ held)
  std::unique_ptr<Buffer> take_locked();  // pop the front for a lane, counting it in flight
  void give_back_locked(std::unique_ptr<Buffer> b, std::exception_ptr err);  // (mu_ held)
  void put(const Buffer& b);  // one buffer into the file (the page-cache lane)
  void write_cached(const Buffer& b, size_t from) const;  // [from, len) through the page cache
  // Submit `b` on the ring (or write it another way); false: written already.
  bool submit_direct(const Buffer& b, uint64_t tag);
  // What an O_DIRECT write left: the rest through the page cache.
  void finish_direct(const Buffer& b, int64_t result);
  void trim_extension();  // back to the bytes written (both lanes idle)
  void wake_lanes();      // after which lane takes what changed (mu_ not held)
  [[noreturn]] void rethrow_locked();  // the kept error (mu_ held)
  void keep_error_locked(std::exception_ptr err);  // keep the first error only (mu_ held)

  int fd_;
  std::atomic<int> direct_fd_{-1};  // -1: everything through the page cache
  int direct_fd_owned_ = -1;        // closed at destruction (the ring may still use it)
  WritePathChooser path_choice_;    // which way each whole buffer goes (single lane); its direct_from()
  std::unique_ptr<DirectRing> ring_;  // the direct lane's, when there are two lanes
  std::atomic<bool> two_lanes_{false};
  uint64_t extended_to_ = 0;  // fallocated up to here (by a lane holding a buffer, or a drain)
  std::string path_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<std::unique_ptr<Buffer>> free_;  // guarded by mu_
  std::deque<std::unique_ptr<Buffer>> queue_;  // guarded by mu_, in file order
  int in_flight_ = 0;                          // buffers the lanes hold (guarded by mu_)
  bool stop_ = false;
  bool discard_ = false;  // guarded by mu_
  std::atomic<bool> failed_{false};  // error_ is set (a lock-free check for write())
  std::exception_ptr error_;         // the first failed write's error (guarded by mu_)
  std::unique_ptr<Buffer> fill_;  // the caller's (no lock needed)
  size_t fill_on_disk_ = 0;       // bytes of fill_ a drain already wrote (direct mode)
  std::thread thread_, direct_thread_;
};

}  // namespace a2pack
