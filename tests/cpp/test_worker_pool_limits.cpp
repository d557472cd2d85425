// The worker pool where the process cannot start the threads asked for (an
// address-space limit leaves no room for their stacks): the work is done
// with the threads there are, the caller taking part, instead of failing.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <vector>

#include "base/worker_pool.hpp"

namespace {

// Bytes of address space this process maps now (/proc/self/statm).
size_t mapped_bytes() {
  unsigned long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// fn's exit code in a forked child whose address space may grow by
// `headroom` bytes only (-1 when it was killed).
int in_child_with_headroom(size_t headroom, const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = mapped_bytes() + headroom;
    if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
    int rc = 2;
    try {
      rc = fn();
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(WorkerPoolLimits, WorkIsDoneWithTheThreadsThereAreWhenNoMoreCanStart) {
  // 64 MiB more: room for a few 8 MiB thread stacks, not for 200.
  const int rc = in_child_with_headroom(64u << 20, [] {
    std::vector<std::atomic<int>> hits(5000);
    a2pack::parallel_for(hits.size(), 200, [&](size_t i) { hits[i].fetch_add(1); });
    for (auto& h : hits)
      if (h.load() != 1) return 4;
    // Again, and in the background: the pool has what it could start.
    std::atomic<size_t> sum{0};
    a2pack::BackgroundFor bg(1000, 200, [&](unsigned, size_t i) { sum.fetch_add(i); });
    bg.finish();
    return sum.load() == 999u * 1000u / 2 ? 0 : 5;
  });
  EXPECT_EQ(rc, 0) << "1: an exception escaped; 4, 5: work was lost";
}

}  // namespace
