#include "bag/buffer_pool.hpp"

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace a2pack::bag {
namespace {

constexpr size_t kMinPooled = 1u << 20;     // below this the heap reuses memory well
constexpr size_t kMaxBuffers = 8;
constexpr size_t kMaxPooledBytes = 256u << 20;

struct Pool {
  std::mutex mu;
  std::vector<std::pair<uint8_t*, size_t>> free;  // (pointer, capacity)
  size_t bytes = 0;

  // The smallest free buffer that holds n bytes without wasting more than 4×.
  uint8_t* take(size_t n, size_t& cap) {
    std::lock_guard<std::mutex> lk(mu);
    size_t best = free.size();
    for (size_t i = 0; i < free.size(); ++i)
      if (free[i].second >= n && free[i].second / 4 <= n &&
          (best == free.size() || free[i].second < free[best].second))
        best = i;
    if (best == free.size()) return nullptr;
    auto [p, c] = free[best];
    free.erase(free.begin() + static_cast<std::ptrdiff_t>(best));
    bytes -= c;
    cap = c;
    return p;
  }

  // Keep p unless the pool is full; evicts the smallest buffer to make room.
  void give(uint8_t* p, size_t cap) {
    {
      std::lock_guard<std::mutex> lk(mu);
      while (!free.empty() && (free.size() >= kMaxBuffers || bytes + cap > kMaxPooledBytes)) {
        size_t smallest = 0;
        for (size_t i = 1; i < free.size(); ++i)
          if (free[i].second < free[smallest].second) smallest = i;
        if (free[smallest].second >= cap) break;
        std::free(free[smallest].first);
        bytes -= free[smallest].second;
        free.erase(free.begin() + static_cast<std::ptrdiff_t>(smallest));
      }
      if (free.size() < kMaxBuffers && bytes + cap <= kMaxPooledBytes) {
        free.emplace_back(p, cap);
        bytes += cap;
        return;
      }
    }
    std::free(p);
  }
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: batches may outlive statics
  return *p;
}

}  // namespace

PooledBuffer::PooledBuffer(size_t n) {
  if (n == 0) n = 1;
  if (n >= kMinPooled) p_ = pool().take(n, cap_);
  if (!p_) {
    p_ = static_cast<uint8_t*>(std::malloc(n));
    if (!p_) throw std::bad_alloc();
    cap_ = n;
  }
}

PooledBuffer::~PooledBuffer() { release(); }

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& o) noexcept {
  if (this != &o) {
    release();
    p_ = o.p_;
    cap_ = o.cap_;
    o.p_ = nullptr;
    o.cap_ = 0;
  }
  return *this;
}

void PooledBuffer::release() noexcept {
  if (!p_) return;
  if (cap_ >= kMinPooled && cap_ <= kMaxPooledBytes) {
    try {
      pool().give(p_, cap_);
    } catch (...) {
      std::free(p_);
    }
  } else {
    std::free(p_);
  }
  p_ = nullptr;
  cap_ = 0;
}

}  // namespace a2pack::bag
