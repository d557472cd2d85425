// The producers' placement beside a slow consumer, driven step by step: what
// Placement decides from the takes it is told of, with no timing involved
// (the feed's own tests cannot say how soon a loaded machine schedules).
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

#include "feed/placement.hpp"

using a2pack::feed::Placement;

namespace {

struct Pinned {  // this thread on one CPU for the test's length
  cpu_set_t before{};
  int cpu = -1;
  Pinned() {
    sched_getaffinity(0, sizeof before, &before);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &before)) {
        cpu = c;
        break;
      }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof one, &one);
  }
  ~Pinned() { sched_setaffinity(0, sizeof before, &before); }
};

bool may_run_on(std::thread& t, int cpu) {
  cpu_set_t s;
  pthread_getaffinity_np(t.native_handle(), sizeof s, &s);
  return CPU_ISSET(cpu, &s);
}

int process_cpus() {
  cpu_set_t s;
  sched_getaffinity(0, sizeof s, &s);
  return CPU_COUNT(&s);
}

}  // namespace

TEST(FeedPlacement, SlowTakesOnOneCpuSpareItAndFallingBehindFreesIt) {
  if (process_cpus() < 2) GTEST_SKIP() << "one CPU: nothing to spare";
  std::atomic<bool> stop{false};
  std::vector<std::thread> producers;
  Placement p;
  p.begin(true);
  for (int i = 0; i < 2; ++i)
    producers.emplace_back([&] {
      while (!stop) std::this_thread::yield();
    });
  {
    Pinned here;  // the consumer stays on here.cpu (threads made before keep their mask)
    for (unsigned i = 0; i + 1 < Placement::kSettle; ++i) p.consumer_at(producers, false);
    EXPECT_EQ(p.spared(), -1);  // not yet: one take short
    p.consumer_at(producers, false);
    EXPECT_EQ(p.spared(), here.cpu);
    for (auto& t : producers) EXPECT_FALSE(may_run_on(t, here.cpu));
    // The consumer falls behind (it waits, or takes faster than the
    // producers fill): they may use its CPU again.
    p.consumer_at(producers, true);
    EXPECT_EQ(p.spared(), -1);
    for (auto& t : producers) EXPECT_TRUE(may_run_on(t, here.cpu));
    // A streak broken by a fast take starts again from nothing.
    for (unsigned i = 0; i + 2 < Placement::kSettle; ++i) p.consumer_at(producers, false);
    p.consumer_at(producers, true);
    p.consumer_at(producers, false);
    EXPECT_EQ(p.spared(), -1);
  }
  stop = true;
  for (auto& t : producers) t.join();
}

TEST(FeedPlacement, DisabledNeverMovesAnything) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> producers;
  Placement p;
  p.begin(false);
  producers.emplace_back([&] {
    while (!stop) std::this_thread::yield();
  });
  {
    Pinned here;
    for (unsigned i = 0; i < 3 * Placement::kSettle; ++i) p.consumer_at(producers, false);
    EXPECT_EQ(p.spared(), -1);
    EXPECT_TRUE(may_run_on(producers[0], here.cpu));
  }
  stop = true;
  producers[0].join();
}
