// base/stale_temps: which names are writer temporaries, and that only
// abandoned ones (dead pid, no lock) are removed.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/file_io.hpp"
#include "base/path_prefix.hpp"
#include "base/stale_temps.hpp"
#include "test_util.hpp"

using namespace a2pack;

TEST(StaleTemps, NamesOfWriterTemporaries) {
  std::string base;
  EXPECT_EQ(temp_owner("out.bag.tmp-123-4", &base), 123);
  EXPECT_EQ(base, "out.bag");
  EXPECT_EQ(temp_owner("limits.x.bagz.tmp-7-0", &base), 7);
  EXPECT_EQ(base, "limits.x.bagz");
  EXPECT_EQ(temp_owner("a.tmp-1.tmp-9-9", &base), 9);  // the last ".tmp-" decides
  EXPECT_EQ(base, "a.tmp-1");
  for (const char* no : {"out.bag", "out.bag.tmp", "out.bag.tmp-1", "out.bag.tmp-x-1",
                         "out.bag.tmp-1-2-3", "out.bag.tmp--1", ".tmp-1-2", "out.bag.tmp-1-"})
    EXPECT_EQ(temp_owner(no), 0) << no;
}

TEST(StaleTemps, RemovesOnlyAbandonedOnes) {
  a2test::TempDir dir;
  const std::string out = dir / "p.a2pack";
  const long dead = 999999999;  // above any pid_max
  ASSERT_FALSE(process_alive(dead));
  ASSERT_TRUE(process_alive(::getpid()));
  auto touch = [&](const std::string& name) { std::ofstream(dir / name) << "x"; };
  touch("p.a2pack.tmp-999999999-0");            // dead writer: removed
  touch("p.a2pack.tmp-" + std::to_string(::getpid()) + "-5");  // live pid: kept
  touch("p.a2pack.tmp-999999999-x");            // not our name: kept
  touch("q.a2pack.tmp-999999999-1");            // another output: kept by remove_stale_temps
  std::filesystem::create_directory(dir / "p.a2pack.tmp-999999999-2");  // a folder: kept
  // A dead pid whose file someone holds locked (a writer in another pid
  // namespace, a forked child): kept.
  touch("p.a2pack.tmp-999999999-3");
  int fd = ::open((dir / "p.a2pack.tmp-999999999-3").c_str(), O_RDONLY);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  auto gone = remove_stale_temps(out);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], dir / "p.a2pack.tmp-999999999-0");
  ::close(fd);
  EXPECT_TRUE(std::filesystem::exists(dir / "p.a2pack.tmp-999999999-3"));
  gone = remove_stale_temps_in(dir.path());
  EXPECT_EQ(gone.size(), 2u);  // q's, and the one no longer locked
  EXPECT_TRUE(std::filesystem::exists(dir / ("p.a2pack.tmp-" + std::to_string(::getpid()) + "-5")));
  EXPECT_TRUE(std::filesystem::exists(dir / "p.a2pack.tmp-999999999-x"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "p.a2pack.tmp-999999999-2"));
}

TEST(StaleTemps, AtomicFileHoldsItsLock) {
  a2test::TempDir dir;
  AtomicFile f(dir / "o.bin");
  int fd = ::open(f.temp_path().c_str(), O_RDONLY);
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0);  // the writer holds it
  ::close(fd);
}

TEST(PathPrefix, LocalPrefixes) {
  EXPECT_EQ(strip_local_prefix("posix:/tmp/x.bag"), "/tmp/x.bag");
  EXPECT_EQ(strip_local_prefix("/posix:/tmp/x.bag"), "/tmp/x.bag");
  EXPECT_EQ(strip_local_prefix("fs:/tmp/x.bag"), "/tmp/x.bag");
  EXPECT_EQ(strip_local_prefix("posix:x.bag"), "x.bag");
  EXPECT_EQ(strip_local_prefix("/tmp/a:b.bag"), "/tmp/a:b.bag");
  EXPECT_EQ(strip_local_prefix("/tmp/posix:x"), "/tmp/posix:x");
}
