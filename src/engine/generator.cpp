// Many games into a folder of run files, reproducible whatever the job count:
// run i's bytes depend only on (options, seed, i).
#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/worker_pool.hpp"
#include "engine/generator.hpp"
#include "engine/rng.hpp"

namespace a2pack::engine {

uint64_t run_seed(uint64_t seed, uint64_t i) {
  // Mix both inputs before combining so that neighbouring master seeds and
  // neighbouring run indexes give unrelated games.
  return mix64(mix64(seed) ^ mix64(i + 0x9E3779B97F4A7C15ull));
}

namespace {

std::string encode(const run::Run& r, run::Kind format) {
  switch (format) {
    case run::Kind::v2: return run::encode_v2(r);
    // v1 has no place for branch values; dropping them is what asking for v1 means.
    case run::Kind::v1: return run::encode_v1(r, /*drop_branches=*/true);
    default: fail(A2PACK_E_INVALID_ARGUMENT, "unknown run format {}", static_cast<int>(format));
  }
}

// Play run i and write it; touches nothing shared, so runs can go in any
// order on any thread.
void write_one(const GenOptions& opts, const std::string& dir, uint64_t seed, uint64_t i) {
  GenOptions o = opts;
  o.start_unix_s = opts.start_unix_s + 60 * i;  // as if started a minute apart
  run::Run r = play_game(o, run_seed(seed, i));
  std::string bytes = encode(r, opts.format);
  write_file_atomic(fmt::format("{}/run-{:06d}.a2run2", dir, i), bytes.data(), bytes.size());
}

}  // namespace

void generate_dir(const GenOptions& opts, const std::string& dir, uint64_t n, uint64_t seed,
                  const std::function<bool(uint64_t, uint64_t)>& progress) {
  check_options(opts);
  if (opts.format != run::Kind::v1 && opts.format != run::Kind::v2)
    fail(A2PACK_E_INVALID_ARGUMENT, "unknown run format {}", static_cast<int>(opts.format));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail_errno("create directory", dir, ec.value());
  if (n == 0) return;

  // The games run on a helper thread (plus pool workers) while this thread
  // only reports progress: callers such as Python callbacks need progress on
  // the thread that called, and handing out the runs one at a time to the
  // whole pool keeps every worker busy despite very uneven game lengths.
  const unsigned workers = resolve_workers(opts.jobs);
  std::mutex mu;
  std::condition_variable cv;
  uint64_t done = 0;
  bool finished = false;
  std::exception_ptr error;
  std::atomic<bool> stop{false};

  std::thread games([&] {
    try {
      parallel_for(n, workers, [&](size_t i) {
        if (stop.load(std::memory_order_relaxed)) return;
        write_one(opts, dir, seed, i);
        {
          std::lock_guard<std::mutex> lk(mu);
          ++done;
        }
        cv.notify_one();
      });
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu);
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      finished = true;
    }
    cv.notify_one();
  });
  // However this function leaves (a throwing callback included), stop the
  // games and wait for them: the thread uses this frame's variables.
  struct Joiner {
    std::thread& t;
    std::atomic<bool>& stop;
    ~Joiner() {
      stop.store(true);
      t.join();
    }
  } joiner{games, stop};

  // Completions that arrive while the callback runs are reported together,
  // so a slow callback never slows the games; the last report is (n, n).
  uint64_t reported = 0;
  bool interrupted = false;
  for (;;) {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return finished || done != reported; });
    const uint64_t now = done;
    const bool last = finished;
    lk.unlock();
    if (now != reported && progress && !interrupted && !progress(now, n)) {
      interrupted = true;
      stop.store(true);
    }
    reported = now;
    if (last) break;
  }
  if (error) std::rethrow_exception(error);
  if (interrupted)
    fail(A2PACK_E_INTERRUPTED, "generation stopped by the progress callback after {} of {} runs",
         reported, n);
}

}  // namespace a2pack::engine
