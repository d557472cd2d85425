// A small persistent worker pool. Calls pass their own worker cap, so one
// caller asking for 2 workers never changes how many another gets, and the
// calling thread always takes part (a cap of 1 runs inline, no thread hop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

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

}  // namespace a2pack
