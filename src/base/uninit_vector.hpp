// A vector whose resize() leaves new elements uninitialised, for output
// columns that a decoder overwrites entirely: zero-filling them first would be
// a second pass over the memory (and would take every page fault on the
// calling thread before the workers start).
#pragma once

#include <memory>
#include <type_traits>
#include <vector>

namespace a2pack {

template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  static_assert(std::is_trivially_default_constructible_v<T>);
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-init: no zeroing
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
using uninit_vector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace a2pack
