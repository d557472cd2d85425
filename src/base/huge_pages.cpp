#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#include "base/uninit_vector.hpp"

namespace a2pack::huge_pages {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
// Freed blocks are kept for reuse up to this total: a training loop asks for
// batches of about the same size again and again, and a reused block has its
// pages already faulted in, whereas a fresh one makes the kernel zero every
// page on first touch (measured: 15% of a 3 000-run batch decode). The cap
// bounds what an idle process keeps resident after a large batch.
constexpr size_t kCacheBytes = size_t{128} << 20;

size_t round_up(size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

struct Block {
  void* p;
  size_t len;
};

// malloc's own reuse does not reach these sizes: glibc serves them with
// mmap/munmap (or trims them from the heap top), so every batch would fault
// its pages in afresh; no allocator library is linked just for this.
class Cache {
 public:
  void* take(size_t len) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = blocks_.size();
    for (size_t i = 0; i < blocks_.size(); ++i) {
      size_t l = blocks_[i].len;
      // Best fit, and never a block more than twice the request (that would
      // pin memory the caller does not use).
      if (l >= len && l / 2 <= len && (best == blocks_.size() || l < blocks_[best].len)) best = i;
    }
    if (best == blocks_.size()) return nullptr;
    void* p = blocks_[best].p;
    bytes_ -= blocks_[best].len;
    blocks_.erase(blocks_.begin() + static_cast<ptrdiff_t>(best));
    return p;
  }
  bool keep(void* p, size_t len) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes_ + len > kCacheBytes) return false;
    try {
      blocks_.push_back({p, len});
    } catch (...) {
      return false;
    }
    bytes_ += len;
    return true;
  }

 private:
  std::mutex mu_;
  std::vector<Block> blocks_;
  size_t bytes_ = 0;
};

// Leaked on purpose: blocks may be freed by other static destructors (a
// batch held by a global) after this object would have been destroyed.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

void* map_fresh(size_t len) {
  // Over-map by one huge page, then trim both ends so the block starts on a
  // 2 MiB boundary (mmap only promises 4 KiB alignment).
  void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (base + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  if (aligned > base) munmap(raw, aligned - base);
  uintptr_t end = base + len + kHugePage;
  if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
#ifdef MADV_HUGEPAGE
  // Advice only: where THP is disabled the mapping keeps 4 KiB pages.
  madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<void*>(aligned);
}
}  // namespace

void* map(size_t bytes) {
  size_t len = round_up(bytes);
  if (len < bytes || len + kHugePage < len) throw std::bad_alloc();
  if (void* p = cache().take(len)) return p;
  return map_fresh(len);
}

void unmap(void* p, size_t bytes) noexcept {
  size_t len = round_up(bytes);
  if (!cache().keep(p, len)) munmap(p, len);
}

}  // namespace a2pack::huge_pages
