#include "base/batch_read.hpp"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/fork_stamp.hpp"

#ifdef A2PACK_HAVE_URING
#include <liburing.h>
#endif

namespace a2pack {

bool io_uring_disabled_by_env() {
  const char* v = std::getenv("A2PACK_IO_URING");
  return v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "false") == 0);
}

#ifdef A2PACK_HAVE_URING
namespace {

// Set once io_uring has been refused (by the kernel, a filter or the
// environment): the refusal holds for the whole process; a ring per thread.
std::atomic<bool> g_refused{false};

// One ring per thread, made on first use. A forked child inherits shared
// mappings of the parent's ring and a descriptor of it: using them would
// queue into the parent's ring, so the child unmaps and closes its copies
// (the parent's ring lives on through the parent's own) and makes its own.
struct Ring {
  io_uring ring{};
  bool ready = false;
  ForkStamp made_in;

  ~Ring() {
    if (ready) io_uring_queue_exit(&ring);
  }

  io_uring* get() {
    if (ready && made_in.forked()) {
      io_uring_queue_exit(&ring);
      ready = false;
    }
    if (ready) return &ring;
    if (g_refused.load(std::memory_order_relaxed)) return nullptr;
    if (io_uring_disabled_by_env()) {
      g_refused.store(true, std::memory_order_relaxed);
      return nullptr;
    }
    int rc = io_uring_queue_init(kBatchReadDepth, &ring, 0);
    if (rc < 0) {
      // ENOSYS (old kernel), EPERM (seccomp, io_uring_disabled): never
      // going to work here. ENOMEM (locked-memory limit on old kernels):
      // neither, for practical purposes.
      g_refused.store(true, std::memory_order_relaxed);
      return nullptr;
    }
    made_in = ForkStamp();
    ready = true;
    return &ring;
  }
};

thread_local Ring t_ring;

}  // namespace

bool batch_read_available() { return t_ring.get() != nullptr; }

BatchRead read_batch(const FileRead* reads, size_t n, BatchReadFailure* failure,
                     const std::function<void(size_t)>* on_read) {
  if (n == 0) return BatchRead::done;
  io_uring* ring = t_ring.get();
  if (!ring) return BatchRead::unavailable;

  // One read asks for at most this much (the SQE's length is 32 bits); a
  // larger request is continued like a short read.
  constexpr size_t kMaxPiece = size_t{1} << 30;
  std::vector<size_t> got(n, 0);  // bytes arrived per request
  std::vector<size_t> again;      // to queue again: short reads, EINTR/EAGAIN
  size_t next = 0;                // first request never queued
  size_t in_flight = 0;
  bool failed = false;
  BatchReadFailure first{};

  auto queue = [&](size_t i) {
    const FileRead& r = reads[i];
    const size_t left = r.len - got[i];
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    io_uring_prep_read(sqe, r.fd, r.dst + got[i], static_cast<unsigned>(left < kMaxPiece ? left : kMaxPiece),
                       r.offset + got[i]);
    io_uring_sqe_set_data64(sqe, i);
    ++in_flight;
  };
  auto fail_at = [&](size_t i, int err) {
    if (failed && first.index <= i) return;
    failed = true;
    first = {i, err, reads[i].offset + got[i]};
  };

  // After a failure nothing new is queued, but the loop runs on until every
  // queued read has completed: the caller's buffers must not be written
  // once this returns.
  while (true) {
    while (!failed && !again.empty() && io_uring_sq_space_left(ring) > 0) {
      queue(again.back());
      again.pop_back();
    }
    while (!failed && next < n && io_uring_sq_space_left(ring) > 0) queue(next++);
    if (in_flight == 0) break;
    int rc = io_uring_submit_and_wait(ring, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      // The ring refused the submission itself (not a read's error): wait
      // for what the kernel already took, then report it.
      fail_at(next - 1, -rc);
      while (in_flight > 0) {
        io_uring_cqe* cqe = nullptr;
        if (io_uring_wait_cqe(ring, &cqe) < 0) break;
        io_uring_cqe_seen(ring, cqe);
        --in_flight;
      }
      break;
    }
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      ++seen;
      --in_flight;
      const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      if (res == -EINTR || res == -EAGAIN) {
        again.push_back(i);
      } else if (res < 0) {
        fail_at(i, -res);
      } else if (res == 0) {
        if (got[i] < reads[i].need) fail_at(i, 0);  // the file ended before the bytes needed
        else if (on_read && !failed) (*on_read)(i);
      } else {
        got[i] += static_cast<size_t>(res);
        // Short of `need`: continue. Between `need` and `len` only an
        // O_DIRECT read of whole blocks that met the end of the file stops.
        if (got[i] < reads[i].need) again.push_back(i);
        else if (on_read && !failed) (*on_read)(i);
      }
    }
    io_uring_cq_advance(ring, seen);
  }
  if (failed) {
    if (failure) *failure = first;
    return BatchRead::failed;
  }
  return BatchRead::done;
}

#else  // built without liburing

bool batch_read_available() { return false; }

BatchRead read_batch(const FileRead*, size_t n, BatchReadFailure*, const std::function<void(size_t)>*) {
  return n == 0 ? BatchRead::done : BatchRead::unavailable;
}

#endif

}  // namespace a2pack
