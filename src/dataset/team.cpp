#include "dataset/team.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "base/spin.hpp"

namespace a2pack::dataset {

namespace {

// How long an idle helper keeps spinning before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(200);
constexpr unsigned kMaxHelpers = 63;

// The one job slot. `gen` is odd while a job is open. A helper joins by
// incrementing `active` and then checking that `gen` has not moved; the
// caller closes by moving `gen` and then waits for `active` to drop to 0.
// (Both sides write, then read the other's variable, sequentially
// consistent: either the helper sees the job closed and leaves without
// touching it, or the caller sees the helper and waits for it.)
struct Team {
  std::mutex busy;
  std::mutex mu;  // for sleeping helpers' wake-up
  std::condition_variable cv;
  std::atomic<uint64_t> gen{0};
  std::atomic<int> active{0};
  std::atomic<size_t> next{0};
  std::atomic<int> caller_cpu{-1};  // where the job's caller runs (sched_getcpu)
  size_t chunks = 0;
  int limit = 0;  // helpers that may join this job
  const std::function<void(const ChunkClaim&)>* body = nullptr;
  int sleepers = 0;  // helpers blocked on cv (guarded by mu)
  struct Helper {
    pthread_t id;
    cpu_set_t home;  // the CPUs it may use (inherited at creation)
    bool known;      // home could be read
  };
  std::vector<Helper> started;  // every helper so far (guarded by busy)

  void work() {
    const ChunkClaim claim = [this] {
      size_t c = next.fetch_add(1);
      return c < chunks ? c : chunks;
    };
    (*body)(claim);
  }

  // Keep `thread` off `cpu`: its home CPUs but that one (nothing when that
  // was its only one). A running thread moves at once.
  static bool bar(pthread_t thread, const cpu_set_t& home, int cpu) {
    cpu_set_t others = home;
    CPU_CLR(cpu, &others);
    return CPU_COUNT(&others) > 0 && pthread_setaffinity_np(thread, sizeof others, &others) == 0;
  }

  // Before waking sleeping helpers: bar them from the caller's CPU, so the
  // wake-up places them elsewhere. Otherwise, with the other CPUs busy
  // (the caller's loop keeps one so), the scheduler queues a woken helper
  // behind the caller, where it waits milliseconds for a turn that brings
  // nothing. Each helper lifts the bar itself once it runs (helper()).
  void steer_wakeups(int cpu) {
    for (const Helper& h : started)
      if (h.known) bar(h.id, h.home, cpu);
  }

  // `me` carries the CPUs this thread may use (read once, at its creation).
  void helper(const Helper me) {
    const pthread_t self = pthread_self();
    const cpu_set_t& home = me.home;
    const bool known = me.known;
    uint64_t seen = 0;  // the last job this helper looked at
    for (;;) {
      auto open = [&] {
        uint64_t g = gen.load();
        return (g & 1) && g != seen;
      };
      if (!spin_until(open, kSpin)) {
        {
          std::unique_lock<std::mutex> lk(mu);
          ++sleepers;
          cv.wait(lk, open);
          --sleepers;
        }
        // The caller may have barred this thread from its CPU to steer the
        // wake-up: running elsewhere now, it may use every home CPU again.
        if (known) pthread_setaffinity_np(self, sizeof home, &home);
      }
      uint64_t g = gen.load();
      seen = g;
      if (!(g & 1)) continue;
      // On the caller's own CPU a helper cannot help: it only takes turns
      // with the caller, and while it keeps spinning between jobs the
      // scheduler leaves it there (seen on the 2-vCPU VM: both threads on
      // one CPU for seconds, the 2-worker gather at 24-33 us instead of 14).
      // Move to another CPU first.
      const int cpu = sched_getcpu();
      if (known && cpu >= 0 && cpu == caller_cpu.load(std::memory_order_relaxed) &&
          bar(self, home, cpu))
        pthread_setaffinity_np(self, sizeof home, &home);
      int before = active.fetch_add(1);
      if (gen.load() == g && before < limit) work();
      active.fetch_sub(1);
    }
  }
};

std::atomic<Team*> g_team{nullptr};
std::mutex g_create;

// In a forked child the helper threads are gone: forget the parent's team
// (leaked on purpose; its mutexes may be in any state).
void forget_team_in_child() { g_team.store(nullptr); }

Team& team() {
  Team* t = g_team.load(std::memory_order_acquire);
  if (t) return *t;
  std::lock_guard<std::mutex> lk(g_create);
  t = g_team.load();
  if (!t) {
    static bool registered = (pthread_atfork(nullptr, nullptr, forget_team_in_child), true);
    (void)registered;
    t = new Team();
    g_team.store(t, std::memory_order_release);
  }
  return *t;
}

}  // namespace

namespace {
// The whole job on the calling thread.
void run_alone(size_t chunks, const std::function<void(const ChunkClaim&)>& body) {
  size_t next = 0;
  body([&] { return next < chunks ? next++ : chunks; });
}
}  // namespace

void run_claiming(size_t chunks, unsigned threads,
                  const std::function<void(const ChunkClaim&)>& body) {
  if (threads <= 1 || chunks <= 1) {
    run_alone(chunks, body);
    return;
  }
  Team& t = team();
  std::unique_lock<std::mutex> busy(t.busy, std::try_to_lock);
  if (!busy.owns_lock()) {  // another thread's gather is running: do it alone
    run_alone(chunks, body);
    return;
  }
  unsigned want = std::min<unsigned>(threads - 1, kMaxHelpers);
  while (t.started.size() < want) {
    // A new thread inherits its creator's CPUs: read them once, for both
    // the helper and the list the caller steers wake-ups with.
    Team::Helper h{};
    h.known = pthread_getaffinity_np(pthread_self(), sizeof h.home, &h.home) == 0;
    std::thread th([&t, h] { t.helper(h); });
    h.id = th.native_handle();
    t.started.push_back(h);
    th.detach();
  }
  t.body = &body;
  t.chunks = chunks;
  t.limit = static_cast<int>(want);
  t.next.store(0);
  const int cpu = sched_getcpu();
  t.caller_cpu.store(cpu, std::memory_order_relaxed);
  bool wake;
  {
    std::lock_guard<std::mutex> lk(t.mu);  // pairs with a helper going to sleep
    t.gen.fetch_add(1);                    // open (odd)
    wake = t.sleepers > 0;
  }
  if (wake) {
    if (cpu >= 0) t.steer_wakeups(cpu);
    t.cv.notify_all();
  }
  t.work();
  t.gen.fetch_add(1);  // closed (even): late helpers leave without work
  while (t.active.load() != 0) cpu_relax();
}

}  // namespace a2pack::dataset
