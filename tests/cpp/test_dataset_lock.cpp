// Readers never starve appends: an append waits (up to its timeout) for the
// readers that are loading, and readers arriving meanwhile queue behind it.
// A timeout names the folder and who holds the lock.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/fsutil.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;
using dstest::make_run;

namespace {
std::vector<run::Run> some_runs(uint64_t seed, size_t n) {
  std::vector<run::Run> v;
  for (size_t i = 0; i < n; ++i) v.push_back(make_run(seed + i, 50 + i));
  return v;
}
}  // namespace

TEST(DatasetLock, AppendsWaitForReadersThatReopenInALoop) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "a", some_runs(1, 200));
  DirSource a(tmp / "a");
  BuildOptions bo;
  bo.workers = 1;
  build(a, tmp / "ds", bo);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> opens{0};
  std::atomic<int> reader_errors{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&] {
      OpenOptions o;
      o.workers = 1;
      while (!stop.load()) {
        try {
          auto d = Dataset::open(tmp / "ds", o);
          opens.fetch_add(1);
        } catch (const Error&) {
          reader_errors.fetch_add(1);
        }
      }
    });
  // Let the readers get going: some opens happened before each append.
  while (opens.load() < 10) std::this_thread::yield();
  uint64_t total_runs = 200;
  for (int k = 0; k < 3; ++k) {
    std::string in = tmp / ("more" + std::to_string(k));
    dstest::write_runs(in, some_runs(1000 + 10 * k, 5));
    DirSource more(in);
    BuildOptions o;
    o.workers = 1;
    o.lock_timeout_ms = -1;  // the point: it gets the lock at all
    auto r = append(more, tmp / "ds", o);
    total_runs += 5;
    EXPECT_EQ(r.total_runs, total_runs);
    uint64_t seen = opens.load();
    while (opens.load() < seen + 3) std::this_thread::yield();  // readers go on afterwards
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(reader_errors.load(), 0);
  EXPECT_TRUE(verify(tmp / "ds", false, 1).ok);
}

TEST(DatasetLock, TimeoutNamesTheHolder) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "a", some_runs(1, 2));
  DirSource a(tmp / "a");
  build(a, tmp / "ds", BuildOptions{});
  DirLock reader(tmp / "ds", /*exclusive=*/false, -1);  // a reader that is loading
  BuildOptions o;
  for (int64_t timeout : {int64_t{0}, int64_t{50}}) {
    o.lock_timeout_ms = timeout;
    try {
      append(a, tmp / "ds", o);
      ADD_FAILURE() << "the append did not wait for the reader";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), A2PACK_E_IO);
      std::string msg = e.what();
      EXPECT_NE(msg.find(tmp / "ds"), std::string::npos) << msg;
      EXPECT_NE(msg.find("pid " + std::to_string(::getpid()) + " (this process)"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("--lock-timeout"), std::string::npos) << msg;
    }
  }
}
