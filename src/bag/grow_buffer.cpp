#include "bag/grow_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace a2pack::bag {
namespace {

// Above this a buffer gets pages of its own: copying up to here once is cheap,
// and heap blocks this small are reused by the allocator rather than kept idle.
constexpr size_t kHeapMax = size_t{1} << 20;

size_t page_round(size_t n) {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (n > SIZE_MAX - page) throw std::bad_alloc();
  return (n + page - 1) / page * page;
}

}  // namespace

GrowBuffer::~GrowBuffer() { release(); }

GrowBuffer& GrowBuffer::operator=(GrowBuffer&& o) noexcept {
  if (this != &o) {
    release();
    p_ = o.p_;
    size_ = o.size_;
    cap_ = o.cap_;
    mapped_ = o.mapped_;
    o.p_ = nullptr;
    o.size_ = o.cap_ = 0;
    o.mapped_ = false;
  }
  return *this;
}

void GrowBuffer::release() noexcept {
  if (mapped_)
    ::munmap(p_, cap_);
  else
    std::free(p_);
  p_ = nullptr;
  size_ = cap_ = 0;
  mapped_ = false;
}

void GrowBuffer::reserve(size_t n) {
  if (n <= cap_) return;
  if (n <= kHeapMax) {
    void* p = std::realloc(p_, n);
    if (!p) throw std::bad_alloc();
    p_ = static_cast<uint8_t*>(p);
    cap_ = n;
    return;
  }
  n = page_round(n);
  if (mapped_) {
    void* p = ::mremap(p_, cap_, n, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
    p_ = static_cast<uint8_t*>(p);
    cap_ = n;
    return;
  }
  // From the heap to pages of its own: one copy of at most kHeapMax bytes.
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (size_) std::memcpy(p, p_, size_);
  std::free(p_);
  p_ = static_cast<uint8_t*>(p);
  cap_ = n;
  mapped_ = true;
}

}  // namespace a2pack::bag
