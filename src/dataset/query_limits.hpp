// Limits on a query of metadata.db that a caller wrote. A filter is any SQL
// expression, so it can run for very long (a recursive CTE never ends): a
// deadline, and a callback asked now and then whether to go on (a binding's
// way to let Ctrl-C through). SQLite's progress handler checks both while the
// statement runs; a stopped statement fails with INTERRUPTED naming the
// query and why it stopped.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/error.hpp"
#include "dataset/metadata.hpp"

namespace a2pack::dataset {

struct QueryLimits {
  int64_t timeout_ms = 0;  // > 0: stop the query after this long (at most kMaxQueryTimeoutMs)
  // Called about every kQueryCallbackMs with the milliseconds since the query
  // began; false stops it.
  std::function<bool(uint64_t elapsed_ms)> keep_going;
};

constexpr uint64_t kQueryCallbackMs = 10;
// About 31 years: longer deadlines are refused rather than overflowing the clock.
constexpr int64_t kMaxQueryTimeoutMs = int64_t{1} << 40;

// Watches the statements run on `db` while it lives (one query at a time per
// connection: the caller holds the connection's lock).
class QueryWatch {
 public:
  QueryWatch(Db& db, const QueryLimits& limits);
  ~QueryWatch();
  QueryWatch(const QueryWatch&) = delete;
  QueryWatch& operator=(const QueryWatch&) = delete;

  // Run `body` (which prepares and steps the query `sql`); when the watch
  // stopped it, the error says so, naming the query, instead of SQLite's
  // "interrupted".
  template <typename F>
  void run(const std::string& sql, F&& body) {
    try {
      body();
    } catch (const Error& e) {
      if (stop_ != Stop::none && e.status() == A2PACK_E_INTERRUPTED) fail_stopped(sql);
      throw;
    }
  }

 private:
  enum class Stop { none, deadline, caller };
  using Clock = std::chrono::steady_clock;
  static int on_progress(void* self);
  [[noreturn]] void fail_stopped(const std::string& sql) const;
  uint64_t elapsed_ms(Clock::time_point now) const;

  Db& db_;
  const QueryLimits& limits_;
  Clock::time_point start_, deadline_, next_call_;
  Stop stop_ = Stop::none;
};

}  // namespace a2pack::dataset
