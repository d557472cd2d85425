#include "base/worker_pool.hpp"

#include "base/spin.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <system_error>
#include <thread>
#include <vector>

namespace a2pack {
namespace {

// How long a pool thread (or a caller waiting for one) polls before it
// sleeps: see base/spin.hpp.
constexpr auto kSpinWindow = std::chrono::microseconds(100);

}  // namespace

struct PoolJob {
  const std::function<void(unsigned, size_t)>* body;
  size_t n, grain;
  std::atomic<size_t> next{0};
  std::atomic<unsigned> next_worker{1};  // 0 is the caller
  std::atomic<int> active{0};
  std::mutex mu;
  std::condition_variable done_cv;
  std::exception_ptr error;
  size_t error_at = SIZE_MAX;  // the index whose body threw `error`

  // Claim chunks until none are left. Runs on the caller and on pool threads.
  // Of several bodies that throw, the one with the lowest index wins, so the
  // error is the one a serial loop would meet first whatever the timing (every
  // chunk before a failing one was claimed before it, and finishes).
  void work(unsigned worker) {
    for (;;) {
      size_t i = next.fetch_add(grain);
      if (i >= n) return;
      size_t end = i + grain < n ? i + grain : n;
      try {
        for (; i < end; ++i) (*body)(worker, i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!error || i < error_at) {
          error = std::current_exception();
          error_at = i;
        }
        next.store(n, std::memory_order_relaxed);  // stop the others early
        return;
      }
    }
  }

  // Returns once every thread that claimed chunks is done (briefly polling
  // first: the others usually finish within microseconds).
  void wait_done() {
    if (!spin_until([&] { return active.load(std::memory_order_acquire) == 0; }, kSpinWindow)) {
      std::unique_lock<std::mutex> lk(mu);
      done_cv.wait(lk, [&] { return active.load() == 0; });
    }
  }
};

namespace {

class Pool;
std::atomic<Pool*> g_pool{nullptr};

class Pool {
 public:
  static Pool& instance() {
    static const bool registered = [] {
      // A forked child has none of the parent's threads, and a lock may have
      // been held at fork time: it starts over with a fresh pool (the old one
      // is leaked on purpose; its threads do not exist in the child).
      ::pthread_atfork(nullptr, nullptr, [] { g_pool.store(new Pool()); });
      return true;
    }();
    (void)registered;
    Pool* p = g_pool.load();
    if (!p) {
      Pool* fresh = new Pool();  // never destroyed: threads may outlive statics
      if (g_pool.compare_exchange_strong(p, fresh)) return *fresh;
      delete fresh;
    }
    return *p;
  }

  void submit(const std::shared_ptr<PoolJob>& job, unsigned tickets) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      while (threads_.size() < tickets && threads_.size() < kMaxThreads) {
        try {
          threads_.emplace_back([this] { loop(); });
        } catch (const std::system_error&) {
          // Out of threads or memory for their stacks (a ulimit, a
          // container's pids limit): go on with the threads there are. The
          // caller takes part in every job, so the work still gets done,
          // more slowly; a later call tries again.
          break;
        }
        threads_.back().detach();
      }
      // No more tickets than threads: with none at all, tickets would pile up.
      tickets = static_cast<unsigned>(std::min<size_t>(tickets, threads_.size()));
      for (unsigned t = 0; t < tickets; ++t) queue_.push_back(job);
      queued_.fetch_add(tickets, std::memory_order_release);
    }
    cv_.notify_all();
  }

 private:
  static constexpr size_t kMaxThreads = 256;

  void loop() {
    for (;;) {
      std::shared_ptr<PoolJob> job;
      spin_until([this] { return queued_.load(std::memory_order_acquire) != 0; }, kSpinWindow);
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
      }
      job->active.fetch_add(1);
      if (job->next.load(std::memory_order_relaxed) < job->n) {
        job->work(job->next_worker.fetch_add(1));
      }
      if (job->active.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lk(job->mu);
        job->done_cv.notify_all();
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<PoolJob>> queue_;
  std::atomic<size_t> queued_{0};  // queue_.size(), readable without the lock
  std::vector<std::thread> threads_;
};

}  // namespace

unsigned hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

unsigned resolve_workers(uint32_t requested) {
  return requested == 0 ? hardware_threads() : requested;
}

void parallel_for_worker(size_t n, uint32_t workers,
                         const std::function<void(unsigned, size_t)>& body, size_t grain) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  unsigned w = resolve_workers(workers);
  size_t chunks = (n + grain - 1) / grain;
  if (chunks < w) w = static_cast<unsigned>(chunks);
  if (w <= 1) {
    for (size_t i = 0; i < n; ++i) body(0, i);
    return;
  }
  auto job = std::make_shared<PoolJob>();
  job->body = &body;
  job->n = n;
  job->grain = grain;
  Pool::instance().submit(job, w - 1);
  job->work(0);
  // Every claimed chunk belongs to a thread counted in `active`.
  job->wait_done();
  if (job->error) std::rethrow_exception(job->error);
}

BackgroundFor::BackgroundFor(size_t n, uint32_t workers, std::function<void(unsigned, size_t)> body)
    : body_(std::move(body)) {
  if (n == 0) return;
  job_ = std::make_shared<PoolJob>();
  job_->body = &body_;
  job_->n = n;
  job_->grain = 1;
  unsigned w = resolve_workers(workers);
  Pool::instance().submit(job_, static_cast<unsigned>(std::min<size_t>(w, n)));
}

void BackgroundFor::finish() {
  if (!job_) return;
  std::shared_ptr<PoolJob> job = std::move(job_);
  job->work(0);
  job->wait_done();
  if (job->error) std::rethrow_exception(job->error);
}

BackgroundFor::~BackgroundFor() {
  try {
    finish();
  } catch (...) {
    // Reported by an explicit finish(); here only the waiting matters.
  }
}

void parallel_for(size_t n, uint32_t workers, const std::function<void(size_t)>& body,
                  size_t grain) {
  parallel_for_worker(
      n, workers, [&](unsigned, size_t i) { body(i); }, grain);
}

}  // namespace a2pack
