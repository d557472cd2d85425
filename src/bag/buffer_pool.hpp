// Batch buffers that are reused instead of freshly mapped.
//
// A batch of large records is one big allocation; glibc serves those with a
// fresh mmap, so every batch pays a page fault (and the kernel's zeroing) per
// 4 KiB before the first byte is copied — slower than the copy itself. Freed
// batch buffers go back to a small process-wide pool (at most 8 buffers,
// 256 MiB in all) and the next batch of a similar size takes one. Small
// buffers bypass the pool: the heap already reuses them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace a2pack::bag {

class PooledBuffer {
 public:
  PooledBuffer() = default;
  explicit PooledBuffer(size_t n);  // uninitialised bytes; never null (n = 0 → 1 byte)
  ~PooledBuffer();
  PooledBuffer(PooledBuffer&& o) noexcept : p_(o.p_), cap_(o.cap_) {
    o.p_ = nullptr;
    o.cap_ = 0;
  }
  PooledBuffer& operator=(PooledBuffer&& o) noexcept;
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;

  uint8_t* get() const { return p_; }
  size_t capacity() const { return cap_; }

 private:
  void release() noexcept;
  uint8_t* p_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace a2pack::bag
