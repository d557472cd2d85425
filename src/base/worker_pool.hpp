// A small persistent worker pool. Calls pass their own worker cap, so one
// caller asking for 2 workers never changes how many another gets, and the
// calling thread always takes part (a cap of 1 runs inline, no thread hop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace a2pack {

// Number of hardware threads (at least 1).
unsigned hardware_threads();

// Resolve a user-facing worker count: 0 = all hardware threads.
unsigned resolve_workers(uint32_t requested);

// Run body(i) for every i in [0, n) on up to `workers` threads (0 = all
// cores), work-stealing in chunks of `grain`. Returns when all are done. The
// first exception thrown by any body is rethrown here after the others stop.
void parallel_for(size_t n, uint32_t workers, const std::function<void(size_t)>& body,
                  size_t grain = 1);

// As parallel_for, but body(worker_index, i), worker_index < resolved workers;
// for per-worker scratch buffers.
void parallel_for_worker(size_t n, uint32_t workers,
                         const std::function<void(unsigned, size_t)>& body, size_t grain = 1);

// Work handed to the pool while the caller does something else: body(worker,
// i) for every i in [0, n), started at once on up to `workers` pool threads
// (0 = all cores). finish() has the caller take part in whatever no pool
// thread has claimed yet (so it never waits on a busy pool), waits for the
// rest, and rethrows the first exception of any body. The destructor
// finishes too, swallowing errors, so no body outlives what it refers to.
// Worker indices of bodies are below the resolved `workers` plus 1 (the
// caller takes part as worker 0).
class BackgroundFor {
 public:
  BackgroundFor(size_t n, uint32_t workers, std::function<void(unsigned, size_t)> body);
  ~BackgroundFor();
  BackgroundFor(const BackgroundFor&) = delete;
  BackgroundFor& operator=(const BackgroundFor&) = delete;
  void finish();

 private:
  std::function<void(unsigned, size_t)> body_;
  std::shared_ptr<struct PoolJob> job_;
};

}  // namespace a2pack
