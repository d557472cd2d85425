// A small team of helper threads for splitting one batch gather.
//
// A gather of 4 096 rows takes tens of microseconds, about what it costs to
// wake a sleeping thread through a condition variable, so the general worker
// pool (base/worker_pool) would eat the gain. Here:
//  - helpers spin for a short while after each job before they sleep, so a
//    training loop that gathers batch after batch finds them awake;
//  - the batch is cut into more chunks than threads and every thread,
//    the caller included, claims chunks until none are left, and the caller
//    waits only for helpers that actually joined: a helper that is slow to
//    wake (a busy machine) costs nothing, the caller just does more chunks.
// One job at a time: a caller that finds the team busy runs its job alone.
// After fork() the child starts a fresh team (the parent's helper threads do
// not exist there).
#pragma once

#include <cstddef>
#include <functional>

namespace a2pack::dataset {

// Hands out chunk numbers 0, 1, ... to the threads of one job, each once;
// returns `chunks` when none is left.
using ChunkClaim = std::function<size_t()>;

// Run body(claim) on the calling thread and on up to threads - 1 helpers;
// every chunk in [0, chunks) goes to exactly one claim() call; returns when
// every body has returned. A body may claim its next chunk before it
// finishes the current one (the gathers do, to keep their prefetch stream
// running across chunk boundaries). body must not throw.
void run_claiming(size_t chunks, unsigned threads,
                  const std::function<void(const ChunkClaim&)>& body);


}  // namespace a2pack::dataset
