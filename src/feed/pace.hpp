// When an idle producer looks for work again.
//
// The consumer does not wake a producer each time it takes a batch or gives
// a slot back. On a machine with few cores that wake-up (a futex call, in a
// VM also an inter-processor interrupt) and the woken producer's gather run
// inside the consumer's next(), which is exactly the time the training step
// waits for data; measured on a 2-vCPU VM with 0.5 ms steps, it doubled the
// time next() took. Instead an idle producer sleeps until just after the
// consumer is expected to take its next batch (the consumer's pace, averaged
// over its recent takes), finds the room that take and the consumer's
// release made, and fills while the training step runs. The consumer still
// wakes the producers itself when the ring holds no batch ready, since then
// it is about to wait (see Feed::next and Ring::release), and at every take
// while it takes batches faster than kFast apart: then the producers are
// the bottleneck, a sleeping one costs throughput, and a timed sleep cannot
// be that short (the kernel's timer slack is 50 us). No producer ever sleeps
// longer than kLongest, so a missed moment costs a delay, never a hang.
#pragma once

#include <chrono>
#include <cstdint>

namespace a2pack::feed {

class Pace {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kLongest{20};
  // Before the consumer has taken two batches: look this often.
  static constexpr std::chrono::microseconds kUnknown{200};
  static constexpr std::chrono::microseconds kShortest{20};
  static constexpr std::chrono::microseconds kFast{250};

  // The consumer took a batch at `now`.
  void took(Clock::time_point now) {
    if (last_ != Clock::time_point{}) {
      int64_t gap = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
      // One long gap (an evaluation, a checkpoint) must not send the
      // producers to sleep for as long: a sample counts at most twice the
      // average, so the average follows a slower consumer within a few
      // batches but one outlier moves it little.
      if (interval_ns_ > 0 && gap > 2 * interval_ns_) gap = 2 * interval_ns_;
      interval_ns_ = interval_ns_ == 0 ? gap : interval_ns_ + (gap - interval_ns_) / 8;
    }
    last_ = now;
  }

  // When a producer that found nothing to do at `now` looks again: just
  // after the consumer's next take is due (an eighth of its interval later,
  // so that the take and the release before it have happened); if that is
  // past, a quarter interval on. Between kShortest and kLongest from now.
  Clock::time_point next_look(Clock::time_point now) const {
    if (interval_ns_ == 0) return now + kUnknown;
    const std::chrono::nanoseconds interval(interval_ns_);
    Clock::time_point at = last_ + interval + interval / 8;
    if (at < now + kShortest) at = now + interval / 4;
    if (at < now + kShortest) at = now + kShortest;
    if (at > now + kLongest) at = now + kLongest;
    return at;
  }

  // The consumer takes batches less than kFast apart.
  bool fast() const {
    return interval_ns_ != 0 &&
           interval_ns_ < std::chrono::duration_cast<std::chrono::nanoseconds>(kFast).count();
  }

  void reset() { *this = Pace(); }

 private:
  Clock::time_point last_{};
  int64_t interval_ns_ = 0;  // average time between takes
};

}  // namespace a2pack::feed
