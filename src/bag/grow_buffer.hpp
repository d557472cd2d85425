// A byte buffer that grows without a peak: the decoded bytes of a zstd frame
// whose size is not known until it ends (see ZstdCodec::decompress_unknown).
//
// Growing a vector copies into a new block twice the size, so for a moment
// (and, for heap blocks, for good: freed heap memory stays resident) the
// process holds 1.5-3x the bytes decoded. Here small buffers live on the heap
// and large ones in pages of their own, grown with mremap, which moves page
// table entries rather than bytes: memory stays the bytes decoded, however
// large, and a hostile frame refused at the reader's limit costs the limit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace a2pack::bag {

class GrowBuffer {
 public:
  GrowBuffer() = default;
  ~GrowBuffer();
  GrowBuffer(GrowBuffer&& o) noexcept : p_(o.p_), size_(o.size_), cap_(o.cap_), mapped_(o.mapped_) {
    o.p_ = nullptr;
    o.size_ = o.cap_ = 0;
    o.mapped_ = false;
  }
  GrowBuffer& operator=(GrowBuffer&& o) noexcept;
  GrowBuffer(const GrowBuffer&) = delete;
  GrowBuffer& operator=(const GrowBuffer&) = delete;

  const uint8_t* data() const { return p_; }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  explicit operator bool() const { return p_ != nullptr; }

  // Makes the capacity at least `n` bytes, keeping the bytes held; throws
  // std::bad_alloc when memory runs out.
  void reserve(size_t n);
  // Writable bytes [size(), capacity()).
  uint8_t* tail() { return p_ + size_; }
  // The first `n` bytes of the tail now hold data.
  void append(size_t n) { size_ += n; }
  // The last `n` bytes appended hold no data after all.
  void trim(size_t n) { size_ -= n; }

 private:
  void release() noexcept;
  uint8_t* p_ = nullptr;
  size_t size_ = 0, cap_ = 0;
  bool mapped_ = false;  // pages of its own (mmap), else the heap
};

}  // namespace a2pack::bag
