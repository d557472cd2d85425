// Positioned writes queued on an io_uring: the O_DIRECT lane of a
// background writer (base/background_writer.hpp).
//
// A blocking O_DIRECT pwrite that allocates blocks holds the inode's lock
// on ext4 until the disk has the data, so a second thread writing the same
// file through the page cache waits for it: on this project's VM the two
// together wrote 1.5 GB/s, no more than O_DIRECT alone. Queued on an
// io_uring, a write into blocks already allocated within the file's size
// holds the lock only while it is queued: the page cache and the disk then
// take data at the same time (3.7-4.1 GB/s there, against 2.3-2.7 through
// the page cache alone). liburing (linked statically, as for batch reads)
// sets the ring up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace a2pack {

class DirectRing {
 public:
  // nullptr where io_uring cannot be used here: built without liburing,
  // refused by the kernel or a filter, or A2PACK_IO_URING=0.
  static std::unique_ptr<DirectRing> open(unsigned depth);
  ~DirectRing();
  DirectRing(const DirectRing&) = delete;
  DirectRing& operator=(const DirectRing&) = delete;

  // Queues a write of [data, data + len) at `offset` and submits it; false
  // when the ring takes no more (the caller writes another way). `tag`
  // comes back with its completion.
  bool write(int fd, const void* data, size_t len, uint64_t offset, uint64_t tag);

  struct Done {
    uint64_t tag;
    int64_t result;  // bytes written, or -errno
  };
  // Waits for the next write to finish (one must be in flight).
  Done wait();

 private:
  struct Impl;
  explicit DirectRing(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace a2pack
