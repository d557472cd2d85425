#include "feed/placement.hpp"

#include <pthread.h>

namespace a2pack::feed {

bool Placement::mask_without(int cpu, cpu_set_t* out) const {
  if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed_)) return false;
  *out = allowed_;
  CPU_CLR(cpu, out);
  return CPU_COUNT(out) > 0;
}

void Placement::begin(bool enabled) {
  spared_.store(-1, std::memory_order_relaxed);
  seen_ = -1;
  streak_ = 0;
  enabled_ = enabled && sched_getaffinity(0, sizeof allowed_, &allowed_) == 0 &&
             CPU_COUNT(&allowed_) > 1;
}

void Placement::enter_producer() const {
  cpu_set_t rest;
  if (mask_without(spared(), &rest)) pthread_setaffinity_np(pthread_self(), sizeof rest, &rest);
}

void Placement::enter_helper() const {
  if (enabled_) pthread_setaffinity_np(pthread_self(), sizeof allowed_, &allowed_);
}

void Placement::consumer_at(std::vector<std::thread>& producers, bool behind) {
  if (!enabled_) return;
  const int spared = spared_.load(std::memory_order_relaxed);
  if (behind) {
    streak_ = 0;
    if (spared < 0) return;
    spared_.store(-1, std::memory_order_relaxed);
    for (auto& t : producers) pthread_setaffinity_np(t.native_handle(), sizeof allowed_, &allowed_);
    return;
  }
  const int cpu = sched_getcpu();  // a vDSO read, tens of nanoseconds
  if (cpu == spared) {
    streak_ = 0;
    return;
  }
  streak_ = cpu == seen_ ? streak_ + 1 : 1;
  seen_ = cpu;
  cpu_set_t rest;
  if (streak_ < kSettle || !mask_without(cpu, &rest)) return;
  spared_.store(cpu, std::memory_order_relaxed);
  streak_ = 0;
  for (auto& t : producers) pthread_setaffinity_np(t.native_handle(), sizeof rest, &rest);
}

}  // namespace a2pack::feed
