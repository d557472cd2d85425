#include "dataset/memory.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/error.hpp"

namespace a2pack::dataset {

namespace {
constexpr size_t kHuge = size_t{2} << 20;
}

RowMemory::RowMemory(size_t bytes, bool huge_pages) {
  if (bytes == 0) return;
  size_t len = (bytes + kHuge - 1) / kHuge * kHuge;
  map_len_ = len + kHuge;  // slack to align the start to 2 MiB
  void* p = ::mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    map_len_ = 0;
    fail(A2PACK_E_NO_MEMORY, "cannot map {} bytes for the dataset rows: {}", bytes,
         std::strerror(err));
  }
  map_ = static_cast<uint8_t*>(p);
  auto addr = reinterpret_cast<uintptr_t>(map_);
  data_ = reinterpret_cast<uint8_t*>((addr + kHuge - 1) / kHuge * kHuge);
  size_ = bytes;
  // Give the slack back: only [data_, data_ + len) stays mapped.
  size_t head = static_cast<size_t>(data_ - map_);
  if (head) ::munmap(map_, head);
  size_t tail = map_len_ - head - len;
  if (tail) ::munmap(data_ + len, tail);
  map_ = data_;
  map_len_ = len;
#ifdef MADV_HUGEPAGE
  if (huge_pages) huge_ = ::madvise(data_, len, MADV_HUGEPAGE) == 0;  // a hint; may be refused
#endif
}

RowMemory::~RowMemory() { reset(); }

RowMemory::RowMemory(RowMemory&& o) noexcept { *this = std::move(o); }

RowMemory& RowMemory::operator=(RowMemory&& o) noexcept {
  if (this != &o) {
    reset();
    std::swap(map_, o.map_);
    std::swap(map_len_, o.map_len_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(huge_, o.huge_);
  }
  return *this;
}

void RowMemory::reset() noexcept {
  if (map_) ::munmap(map_, map_len_);
  map_ = data_ = nullptr;
  map_len_ = size_ = 0;
}

}  // namespace a2pack::dataset
