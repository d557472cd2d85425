#include "dataset/query_limits.hpp"

#include <sqlite3.h>

#include <algorithm>

#include "base/error.hpp"

namespace a2pack::dataset {
namespace {
// SQLite virtual-machine steps between two looks at the clock: a few
// microseconds of work, so a stop is seen at once and costs nothing measurable.
constexpr int kStepsPerCheck = 1000;
}  // namespace

QueryWatch::QueryWatch(Db& db, const QueryLimits& limits) : db_(db), limits_(limits) {
  if (limits.timeout_ms > kMaxQueryTimeoutMs)
    fail(A2PACK_E_INVALID_ARGUMENT, "a query timeout of {} ms is longer than the {} ms allowed",
         limits.timeout_ms, kMaxQueryTimeoutMs);
  start_ = Clock::now();
  deadline_ = start_ + std::chrono::milliseconds(std::max<int64_t>(limits.timeout_ms, 0));
  next_call_ = start_ + std::chrono::milliseconds(kQueryCallbackMs);
  if (limits_.timeout_ms > 0 || limits_.keep_going)
    sqlite3_progress_handler(db_.raw(), kStepsPerCheck, &QueryWatch::on_progress, this);
}

QueryWatch::~QueryWatch() { sqlite3_progress_handler(db_.raw(), 0, nullptr, nullptr); }

uint64_t QueryWatch::elapsed_ms(Clock::time_point now) const {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count());
}

int QueryWatch::on_progress(void* p) {
  auto* w = static_cast<QueryWatch*>(p);
  if (w->stop_ != Stop::none) return 1;
  const auto now = Clock::now();
  if (w->limits_.timeout_ms > 0 && now >= w->deadline_) {
    w->stop_ = Stop::deadline;
    return 1;
  }
  if (w->limits_.keep_going && now >= w->next_call_) {
    w->next_call_ = now + std::chrono::milliseconds(kQueryCallbackMs);
    // SQLite is C: nothing may unwind through it. A callback that throws
    // stops the query like one that says no.
    bool go = false;
    try {
      go = w->limits_.keep_going(w->elapsed_ms(now));
    } catch (...) {
    }
    if (!go) {
      w->stop_ = Stop::caller;
      return 1;
    }
  }
  return 0;
}

void QueryWatch::fail_stopped(const std::string& sql) const {
  const double secs = static_cast<double>(elapsed_ms(Clock::now())) / 1000.0;
  if (stop_ == Stop::deadline)
    fail(A2PACK_E_INTERRUPTED,
         "{}: the query \"{}\" was stopped at its deadline of {} s (it ran {:.2f} s)", db_.path(),
         sql, static_cast<double>(limits_.timeout_ms) / 1000.0, secs);
  fail(A2PACK_E_INTERRUPTED, "{}: the query \"{}\" was stopped by the caller after {:.2f} s",
       db_.path(), sql, secs);
}

}  // namespace a2pack::dataset
