#include "base/fork_stamp.hpp"

#include <pthread.h>

#include <atomic>

namespace a2pack {

namespace {
std::atomic<uint64_t> g_generation{0};
void on_fork_child() { g_generation.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

ForkStamp::ForkStamp() {
  static const bool watching = [] {
    ::pthread_atfork(nullptr, nullptr, on_fork_child);
    return true;
  }();
  (void)watching;
  generation_ = g_generation.load(std::memory_order_relaxed);
}

bool ForkStamp::forked() const {
  return g_generation.load(std::memory_order_relaxed) != generation_;
}

}  // namespace a2pack
