// Many positioned reads at once from one thread, through io_uring.
//
// A batch of random reads that miss the page cache waits on the disk, and
// the disk answers fastest with many reads queued. Blocking preads need a
// thread per queued read; on a machine with few cores a hundred threads
// spend more time being woken than the disk spends reading (measured: 256
// random 1.3 KiB reads from 100 threads on 2 cores ran at a quarter of the
// rate fio's psync reached on the same file, and 16 threads beat 100).
// io_uring queues every read of the batch with one system call and needs no
// thread at all. liburing (Debian's liburing-dev, linked statically) sets
// up the rings; the rest is the loop below.
//
// Where io_uring cannot be used (a kernel before 5.6, a seccomp filter or
// the io_uring_disabled sysctl refusing it, liburing absent at build time,
// or A2PACK_IO_URING=0 in the environment) read_batch() says so and the
// caller reads another way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace a2pack {

struct FileRead {
  int fd;
  uint64_t offset;
  size_t len;      // bytes asked for
  size_t need;     // bytes that must arrive before end of file (<= len; O_DIRECT
                   // reads ask for whole blocks past the end of the file)
  uint8_t* dst;
};

enum class BatchRead { done, unavailable, failed };

struct BatchReadFailure {
  size_t index = 0;     // the first request that failed
  int err = 0;          // its errno; 0: the file ended before `need` bytes
  uint64_t offset = 0;  // where the failing read was
};

// Reads every request, up to kBatchReadDepth in flight at a time, from the
// calling thread. Short reads are continued and EINTR/EAGAIN retried. On
// `failed`, every read already queued has finished before it returns (no
// kernel write lands in a buffer after), and *failure names the first
// failed request. Safe from any number of threads (a ring per thread), and
// in a forked child (which makes its own ring).
// `on_read`, when given, is called on the calling thread with the index of
// each request as soon as all of its needed bytes are in place (so the
// caller can start on them while the rest are still on their way); it must
// not throw.
BatchRead read_batch(const FileRead* reads, size_t n, BatchReadFailure* failure,
                     const std::function<void(size_t)>* on_read = nullptr);

constexpr unsigned kBatchReadDepth = 128;

// Whether read_batch can use io_uring in this process (it tries once).
bool batch_read_available();

// A2PACK_IO_URING=0 (or off, false) in the environment: nothing in the
// library uses io_uring.
bool io_uring_disabled_by_env();

}  // namespace a2pack
