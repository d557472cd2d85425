// The feed's pacing of idle producers (feed/pace.hpp) and their placement
// off the consumer's CPU (feed/placement.hpp), with a clock and CPUs the
// test controls.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "feed/pace.hpp"
#include "feed/placement.hpp"

namespace a2pack::feed {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = Pace::Clock;

TEST(FeedPace, UnknownPaceLooksSoon) {
  Pace p;
  const auto now = Clock::now();
  EXPECT_EQ(p.next_look(now), now + Pace::kUnknown);
  EXPECT_FALSE(p.fast());
  p.took(now);  // one take says nothing about the interval
  EXPECT_EQ(p.next_look(now), now + Pace::kUnknown);
}

TEST(FeedPace, LooksJustAfterTheNextTakeIsDue) {
  Pace p;
  const auto t0 = Clock::now();
  for (int i = 0; i <= 10; ++i) p.took(t0 + milliseconds(i));
  const auto last = t0 + milliseconds(10);
  // Right after the take: one interval and an eighth later.
  EXPECT_EQ(p.next_look(last + microseconds(50)), last + microseconds(1125));
  // The take is late: a quarter interval on.
  const auto late = last + microseconds(1200);
  EXPECT_EQ(p.next_look(late), late + microseconds(250));
  EXPECT_FALSE(p.fast());
}

TEST(FeedPace, OneLongGapMovesThePaceLittleAndSleepsAreBounded) {
  Pace p;
  const auto t0 = Clock::now();
  for (int i = 0; i <= 10; ++i) p.took(t0 + milliseconds(i));
  // An evaluation pause of a second counts as twice the interval.
  const auto after = t0 + milliseconds(1010);
  p.took(after);
  // The average is 1.125 ms: the look is 1.125 ms * 9 / 8 later.
  EXPECT_EQ(p.next_look(after), after + std::chrono::nanoseconds(1125000 + 140625));
  // A consumer that is slow for good: the average follows, the sleep stops
  // at kLongest.
  auto t = after;
  for (int i = 0; i < 60; ++i) p.took(t += std::chrono::seconds(1));
  EXPECT_EQ(p.next_look(t), t + Pace::kLongest);
}

TEST(FeedPace, FastConsumersAreRecognisedAndResetForgets) {
  Pace p;
  const auto t0 = Clock::now();
  for (int i = 0; i <= 10; ++i) p.took(t0 + microseconds(40 * i));
  EXPECT_TRUE(p.fast());
  // Never sooner than kShortest from now.
  const auto now = t0 + microseconds(500);
  EXPECT_EQ(p.next_look(now), now + Pace::kShortest);
  p.reset();
  EXPECT_FALSE(p.fast());
}

cpu_set_t affinity_of(std::thread& t) {
  cpu_set_t s;
  CPU_ZERO(&s);
  EXPECT_EQ(pthread_getaffinity_np(t.native_handle(), sizeof s, &s), 0);
  return s;
}

// A producer stand-in: runs enter_producer(), optionally starts a helper
// thread that runs enter_helper() and reports its mask, then waits.
struct Producer {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, entered = false;
  cpu_set_t helper_mask{};
  std::thread t;
  explicit Producer(const Placement& pl) {
    t = std::thread([this, &pl] {
      pl.enter_producer();
      std::thread h([this, &pl] {
        pl.enter_helper();
        sched_getaffinity(0, sizeof helper_mask, &helper_mask);
      });
      h.join();
      std::unique_lock<std::mutex> lk(mu);
      entered = true;
      cv.notify_all();
      cv.wait(lk, [this] { return done; });
    });
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [this] { return entered; });
  }
  ~Producer() {
    if (!t.joinable()) return;
    {
      std::lock_guard<std::mutex> lk(mu);
      done = true;
    }
    cv.notify_all();
    t.join();
  }
};

TEST(FeedPlacement, OffOrOneCpuLeavesTheProducersAnywhere) {
  Placement pl;
  pl.begin(false);
  std::vector<std::thread> none;
  for (unsigned i = 0; i < 2 * Placement::kSettle; ++i) pl.consumer_at(none, false);
  EXPECT_EQ(pl.spared(), -1);
}

TEST(FeedPlacement, SlowConsumerIsSparedFastOneSharesAndItFollowsTheConsumer) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "this process may use one CPU only";
  Placement pl;
  pl.begin(true);
  Producer prod(pl);
  std::vector<std::thread> producers;
  producers.push_back(std::move(prod.t));
  // Back to `prod` (which joins it) however the test ends.
  struct MoveBack {
    std::thread& from;
    std::thread& to;
    ~MoveBack() { to = std::move(from); }
  } back{producers[0], prod.t};
  // A helper started from a producer may run anywhere.
  EXPECT_TRUE(CPU_EQUAL(&prod.helper_mask, &all));

  auto pin_me = [](int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  };
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) cpus.push_back(c);
  pin_me(cpus[0]);
  for (unsigned i = 0; i + 1 < Placement::kSettle; ++i) pl.consumer_at(producers, false);
  EXPECT_EQ(pl.spared(), -1);  // not settled yet
  pl.consumer_at(producers, false);
  EXPECT_EQ(pl.spared(), cpus[0]);
  cpu_set_t m = affinity_of(producers[0]);
  EXPECT_FALSE(CPU_ISSET(cpus[0], &m));
  EXPECT_EQ(CPU_COUNT(&m), CPU_COUNT(&all) - 1);

  // The consumer settles elsewhere: the producers move off that CPU.
  pin_me(cpus[1]);
  for (unsigned i = 0; i < Placement::kSettle; ++i) pl.consumer_at(producers, false);
  EXPECT_EQ(pl.spared(), cpus[1]);
  m = affinity_of(producers[0]);
  EXPECT_FALSE(CPU_ISSET(cpus[1], &m));
  EXPECT_TRUE(CPU_ISSET(cpus[0], &m));

  // A fast consumer: the producers are the bottleneck and run anywhere.
  pl.consumer_at(producers, true);
  EXPECT_EQ(pl.spared(), -1);
  m = affinity_of(producers[0]);
  EXPECT_TRUE(CPU_EQUAL(&m, &all));

  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
}

}  // namespace
}  // namespace a2pack::feed
