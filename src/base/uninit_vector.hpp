// A vector whose resize() leaves new elements uninitialised, for output
// columns that a decoder overwrites entirely: zero-filling them first would be
// a second pass over the memory (and would take every page fault on the
// calling thread before the workers start).
//
// Large columns (a batch of thousands of runs is tens of MB) are mapped on
// 2 MiB boundaries and marked for transparent huge pages: the decoder then
// takes one page fault per 2 MiB instead of one per 4 KiB. Measured on a
// 3 000-run pack, the 4 KiB faults (and the kernel zeroing each page) were a
// quarter of a batch decode's time. Where THP is off the mapping simply stays
// in 4 KiB pages.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace a2pack {

namespace huge_pages {
// Below this a column comes from malloc (whose free lists keep small, hot
// blocks); from here on, from its own huge-page-aligned mapping.
inline constexpr size_t kThreshold = size_t{4} << 20;
void* map(size_t bytes);              // throws std::bad_alloc
void unmap(void* p, size_t bytes) noexcept;
}  // namespace huge_pages

template <typename T>
struct DefaultInitAllocator {
  static_assert(std::is_trivially_default_constructible_v<T>);
  using value_type = T;
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    size_t bytes = n * sizeof(T);
    if (bytes >= huge_pages::kThreshold) return static_cast<T*>(huge_pages::map(bytes));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    size_t bytes = n * sizeof(T);
    if (bytes >= huge_pages::kThreshold)
      huge_pages::unmap(p, bytes);
    else
      std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-init: no zeroing
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const DefaultInitAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const DefaultInitAllocator<U>&) const noexcept {
    return false;
  }
};

template <typename T>
using uninit_vector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace a2pack
