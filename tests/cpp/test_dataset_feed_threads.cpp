// A feed whose producer threads cannot all be started (an address-space
// limit leaves no room for their stacks): a NO_MEMORY error naming the
// thread that failed and the count asked for, the ones started stopped, and
// a feed with fewer threads working in the same process.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <dirent.h>
#include <memory>
#include <string>

#include "base/error.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "feed/feed.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;

namespace {

size_t mapped_bytes() {
  unsigned long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

size_t thread_count() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

TEST(FeedThreads, ProducersThatCannotStartAreANoMemoryErrorNamingTheCount) {
  a2test::TempDir tmp;
  std::vector<run::Run> runs;
  for (int i = 0; i < 6; ++i) runs.push_back(dstest::make_run(i, 30));
  dstest::write_runs(tmp / "runs", runs);
  BuildOptions bo;
  bo.workers = 1;
  DirSource src(tmp / "runs");
  build(src, tmp / "ds", bo);
  OpenOptions oo;
  oo.workers = 1;
  std::shared_ptr<const Dataset> ds = Dataset::open(tmp / "ds", oo);
  feed::Options o;
  o.batch_size = 16;
  o.depth = 2;
  o.pin = feed::Pin::kOff;

  const pid_t pid = ::fork();
  if (pid == 0) {
    // 64 MiB more: room for a few 8 MiB thread stacks, not for 500.
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = mapped_bytes() + (64u << 20);
    if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
    const size_t before = thread_count();
    feed::Options many = o;
    many.threads = 500;
    Error e(A2PACK_OK, "");
    try {
      feed::Feed f(ds, {}, true, many);
    } catch (const Error& x) {
      e = x;
    } catch (...) {
      ::_exit(1);  // not an a2pack error
    }
    std::fprintf(stderr, "the feed of 500 threads: status %d: %s\n", static_cast<int>(e.status()),
                 e.what());
    if (e.status() != A2PACK_E_NO_MEMORY) ::_exit(4);
    const std::string m = e.what();
    if (m.find("producer thread") == std::string::npos || m.find("of 500") == std::string::npos)
      ::_exit(5);
    if (thread_count() != before) ::_exit(6);  // the ones started were stopped
    feed::Options two = o;
    two.threads = 2;
    try {
      feed::Feed f(ds, {}, true, two);
      bool ended = false;
      for (int i = 0; i < 20; ++i) {
        feed::Slot* s = f.next(std::chrono::milliseconds(-1), &ended);
        if (!s) ::_exit(7);
        feed::Ring::release(s);
      }
    } catch (...) {
      ::_exit(7);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: not an a2pack error, 4: another status, 5: the message does not name the thread "
         "and count, 6: threads left running, 7: a feed of two threads failed";
}

}  // namespace
