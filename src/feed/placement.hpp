// Keeps the producer threads off the consumer's CPU while the consumer is
// slower than they are.
//
// A producer's gather touches a few hundred kilobytes: the rows it reads and
// the slot it writes. Run on the CPU the training loop sleeps on between
// steps, it leaves that CPU's caches full of them, and the loop's next()
// then runs cold: measured on a 2-vCPU VM with 0.5 ms steps, next() took
// about twice as long whenever a producer had shared the consumer's CPU.
// The operating system does not know that the two contend, so the feed
// tells it: once the consumer has taken kSettle batches in a row on one CPU,
// each at least Pace::kFast after the last, the producers may run on every
// CPU the process may use except that one (when there is another). While
// the consumer takes batches faster than that, or has to wait for one, the
// producers are the bottleneck and run anywhere again: pinned, they could
// not use the consumer's CPU while it waits for them, and whatever else ran
// on theirs would stall the feed. Best effort: where affinity cannot be set
// the threads run anywhere.
#pragma once

#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

namespace a2pack::feed {

class Placement {
 public:
  // Slow takes on one CPU before the producers keep off it.
  static constexpr unsigned kSettle = 16;

  // On the consumer's thread, before the producers start (`enabled`: the
  // feed's spare_consumer_cpu option). The producers start anywhere.
  void begin(bool enabled);
  // In each producer thread as it starts.
  void enter_producer() const;
  // In a helper thread a producer starts (the next epoch's permutation): it
  // may run on every CPU, rather than inherit the producer's restriction and
  // compete with the producers' gathers.
  void enter_helper() const;
  // On the consumer's thread at each take, and when it is about to wait:
  // `behind` when the producers are the bottleneck (it takes batches faster
  // than Pace::kFast, or waits). Moves the `producers` when the answer or
  // the consumer's CPU changes for good.
  void consumer_at(std::vector<std::thread>& producers, bool behind);
  // The CPU the producers keep off, or -1 (they run anywhere).
  int spared() const { return spared_.load(std::memory_order_relaxed); }

 private:
  bool mask_without(int cpu, cpu_set_t* out) const;

  bool enabled_ = false;
  cpu_set_t allowed_{};  // the process's CPUs when begin() ran
  std::atomic<int> spared_{-1};
  int seen_ = -1;        // the consumer's CPU at the last slow take
  unsigned streak_ = 0;  // slow takes seen there in a row
};

}  // namespace a2pack::feed
