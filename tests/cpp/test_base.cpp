// Basics: CRC32C (both implementations), varints, worker pool, atomic files.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <fcntl.h>
#include "base/background_writer.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/utf8.hpp"
#include "base/varint.hpp"
#include "base/worker_pool.hpp"
#include "base/write_path.hpp"
#include "test_util.hpp"

using namespace a2pack;

TEST(Crc32c, StandardCheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(crc32c::extend_table(0, s, 9), 0xE3069283u);
  EXPECT_EQ(crc32c::compute(s, 9), 0xE3069283u);
  if (crc32c::hardware_available()) EXPECT_EQ(crc32c::extend_hardware(0, s, 9), 0xE3069283u);
}

TEST(Crc32c, EmptyIsZero) { EXPECT_EQ(crc32c::compute("", 0), 0u); }

TEST(Crc32c, HardwareMatchesTableOnRandomData) {
  if (!crc32c::hardware_available()) GTEST_SKIP() << "CPU has no SSE4.2";
  std::mt19937_64 rng(42);
  std::vector<uint8_t> buf(100000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  // Lengths around the 3-stream block boundaries (3 * 4096) and odd offsets.
  for (size_t len : {0ul, 1ul, 7ul, 8ul, 9ul, 4095ul, 12287ul, 12288ul, 12289ul, 24576ul,
                     50001ul, 99990ul}) {
    for (size_t off : {0ul, 1ul, 3ul}) {
      if (off + len > buf.size()) continue;
      EXPECT_EQ(crc32c::extend_hardware(0, buf.data() + off, len),
                crc32c::extend_table(0, buf.data() + off, len))
          << "len " << len << " off " << off;
    }
  }
}

TEST(Crc32c, ExtendEqualsWhole) {
  std::vector<uint8_t> buf(30000);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 31 + 7);
  uint32_t whole = crc32c::compute(buf.data(), buf.size());
  uint32_t part = crc32c::extend(crc32c::compute(buf.data(), 12345), buf.data() + 12345,
                                 buf.size() - 12345);
  EXPECT_EQ(whole, part);
}

TEST(Crc32c, CombineMatchesSequential) {
  std::vector<uint8_t> data(100003);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  uint32_t whole = crc32c::compute(data.data(), data.size());
  for (size_t cut : {size_t{0}, size_t{1}, size_t{4096}, size_t{77777}, data.size()}) {
    uint32_t a = crc32c::compute(data.data(), cut);
    uint32_t b = crc32c::compute(data.data() + cut, data.size() - cut);
    EXPECT_EQ(crc32c::combine(a, b, data.size() - cut), whole) << cut;
  }
}

TEST(Error, ContextIsAddedOnceWhenTheMessageAlreadyBeginsWithIt) {
  auto rethrown = [](const std::string& what, const std::string& context) {
    try {
      rethrow_with_context(Error(A2PACK_E_CHECKSUM, what), context);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), A2PACK_E_CHECKSUM);
      return std::string(e.what());
    }
    ADD_FAILURE() << "nothing thrown";
    return std::string();
  };
  // A pack entry's own error names it; a caller that adds the same context
  // (a dataset build labelling the entry it read) leaves it as it is.
  EXPECT_EQ(rethrown("p.a2pack: entry 2: offset 4096: payload CRC32C mismatch", "p.a2pack: entry 2"),
            "p.a2pack: entry 2: offset 4096: payload CRC32C mismatch");
  EXPECT_EQ(rethrown("offset 4096: bad", "p.a2pack: entry 2"), "p.a2pack: entry 2: offset 4096: bad");
  // Only a whole leading context counts: entry 2 is not entry 20.
  EXPECT_EQ(rethrown("p.a2pack: entry 20: bad", "p.a2pack: entry 2"),
            "p.a2pack: entry 2: p.a2pack: entry 20: bad");
  EXPECT_EQ(rethrown("p.a2pack: entry 2", "p.a2pack: entry 2"),
            "p.a2pack: entry 2: p.a2pack: entry 2");
}

TEST(Varint, RoundTripAndSizes) {
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 300ull, 16383ull, 16384ull, 0xFFFFFFFFull,
                     0x0010000000000001ull, ~0ull}) {
    uint8_t buf[10];
    uint8_t* e = varint::write(buf, v);
    EXPECT_EQ(static_cast<size_t>(e - buf), varint::size(v));
    const uint8_t* p = buf;
    uint64_t out = 0;
    ASSERT_EQ(varint::read<64>(p, e, out), varint::Result::ok);
    EXPECT_EQ(out, v);
    EXPECT_EQ(p, e);
  }
}

TEST(Varint, RejectsTruncatedOverlongAndOverflow) {
  uint64_t out;
  {
    const uint8_t b[] = {0x80, 0x80};
    const uint8_t* p = b;
    EXPECT_EQ(varint::read<64>(p, b + 2, out), varint::Result::truncated);
    EXPECT_EQ(p, b);  // not advanced on failure
  }
  {
    // 11 bytes for a u64: too long.
    const uint8_t b[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    const uint8_t* p = b;
    EXPECT_EQ(varint::read<64>(p, b + 11, out), varint::Result::overlong);
  }
  {
    // 10th byte with more than the one remaining bit: overflows u64.
    const uint8_t b[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02};
    const uint8_t* p = b;
    EXPECT_EQ(varint::read<64>(p, b + 10, out), varint::Result::overlong);
  }
  {
    // u32: 5th byte may carry only 4 bits.
    const uint8_t ok[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F};
    const uint8_t* p = ok;
    ASSERT_EQ(varint::read<32>(p, ok + 5, out), varint::Result::ok);
    EXPECT_EQ(out, 0xFFFFFFFFull);
    const uint8_t bad[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x10};
    p = bad;
    EXPECT_EQ(varint::read<32>(p, bad + 5, out), varint::Result::overlong);
  }
}

TEST(Varint, ZigZag) {
  for (int64_t v : std::vector<int64_t>{0, -1, 1, -2, 123456789, INT64_MIN, INT64_MAX})
    EXPECT_EQ(varint::zigzag_decode(varint::zigzag_encode(v)), v);
  EXPECT_EQ(varint::zigzag_encode(-1), 1u);
  EXPECT_EQ(varint::zigzag_encode(1), 2u);
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(utf8::valid("abc", 3));
  EXPECT_TRUE(utf8::valid("S\xc3\xa4" "ckli", 7));
  EXPECT_FALSE(utf8::valid("\xc3", 1));          // truncated
  EXPECT_FALSE(utf8::valid("\xc0\xaf", 2));      // overlong
  EXPECT_FALSE(utf8::valid("\xed\xa0\x80", 3));  // surrogate
  EXPECT_FALSE(utf8::valid("\xff", 1));
}

TEST(WorkerPool, RunsEveryIndexOnceAtAnyWorkerCount) {
  for (uint32_t w : {0u, 1u, 2u, 7u}) {
    std::vector<std::atomic<int>> hits(1000);
    parallel_for(hits.size(), w, [&](size_t i) { hits[i]++; }, 3);
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "workers " << w;
  }
}

TEST(WorkerPool, RethrowsTheFirstError) {
  EXPECT_THROW(parallel_for(100, 2,
                            [](size_t i) {
                              if (i == 57) fail(A2PACK_E_CORRUPT, "boom at {}", i);
                            }),
               Error);
}

TEST(WorkerPool, NestedCallsComplete) {
  std::atomic<int> total{0};
  parallel_for(8, 2, [&](size_t) { parallel_for(8, 2, [&](size_t) { total++; }); });
  EXPECT_EQ(total.load(), 64);
}

TEST(WorkerPool, BackgroundWorkRunsWhileTheCallerWorks) {
  // Bodies wait for the caller (as decoders wait for reads): the pool runs
  // them in the background, and finish() takes whatever no thread claimed.
  for (uint32_t w : {1u, 2u, 5u}) {
    std::atomic<bool> go{false};
    std::atomic<int> ran{0};
    BackgroundFor work(w, w, [&](unsigned worker, size_t) {
      ASSERT_LE(worker, w);
      while (!go.load()) std::this_thread::yield();
      ran++;
    });
    go = true;
    work.finish();
    EXPECT_EQ(ran.load(), static_cast<int>(w)) << "workers " << w;
  }
  // The caller alone finishes what a busy pool never started.
  std::atomic<int> ran{0};
  {
    BackgroundFor work(64, 1, [&](unsigned, size_t) { ran++; });
    work.finish();
  }
  EXPECT_EQ(ran.load(), 64);
}

TEST(WorkerPool, BackgroundWorkReportsItsFirstErrorAndWaitsWhenDropped) {
  BackgroundFor failing(10, 2, [](unsigned, size_t i) {
    if (i == 3) fail(A2PACK_E_CORRUPT, "boom at {}", i);
  });
  std::string msg;
  EXPECT_EQ(a2test::status_of([&] { failing.finish(); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("boom at 3"), std::string::npos) << msg;
  failing.finish();  // once reported, done
  // Dropped without finish() (an error on the caller's side): it still
  // waits for its bodies, which may refer to the caller's frame.
  std::atomic<int> ran{0};
  {
    BackgroundFor work(8, 2, [&](unsigned, size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ran++;
    });
  }
  EXPECT_EQ(ran.load(), 8);
}

TEST(WorkerPool, WorksInAForkedChild) {
  parallel_for(64, 2, [](size_t) {});  // the parent's pool has threads now
  pid_t pid = ::fork();
  if (pid == 0) {
    std::atomic<int> n{0};
    parallel_for(1000, 2, [&](size_t) { n++; });
    ::_exit(n.load() == 1000 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(AtomicFile, CommitRenamesAndAbortLeavesNothing) {
  a2test::TempDir dir;
  std::string path = dir / "out.bin";
  {
    AtomicFile f(path);
    f.write("hello", 5);
    EXPECT_FALSE(std::filesystem::exists(path));  // not visible before commit
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // temp removed too
  {
    AtomicFile f(path);
    f.write("hello", 5);
    f.pwrite("J", 1, 0);
    f.commit();
  }
  EXPECT_EQ(a2test::read_bytes(path), (std::vector<uint8_t>{'J', 'e', 'l', 'l', 'o'}));
}

// Whether this folder's filesystem takes O_DIRECT (then a direct writer
// must use it).
bool takes_o_direct(const std::string& dir) {
  std::string probe = dir + "/probe";
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

// Buffered; direct; direct past the first 5 MiB (the page cache takes the
// rest, as a bag writer without fsync does); the two direct modes again
// with io_uring turned off, where one thread writes every buffer (choosing
// the way for each) instead of a page-cache lane and an O_DIRECT lane.
class BackgroundModes : public ::testing::TestWithParam<int> {
 protected:
  bool direct() const { return GetParam() != 0; }
  uint64_t direct_from() const { return GetParam() == 2 || GetParam() == 4 ? 5u << 20 : 0; }
  void SetUp() override {
    if (GetParam() >= 3) ::setenv("A2PACK_IO_URING", "0", 1);
  }
  void TearDown() override { ::unsetenv("A2PACK_IO_URING"); }
};
std::string background_mode_name(const ::testing::TestParamInfo<int>& info) {
  static const char* names[] = {"Buffered", "Direct", "DirectPast5MiB", "DirectOneLane",
                                "DirectPast5MiBOneLane"};
  return names[info.param];
}
INSTANTIATE_TEST_SUITE_P(AtomicFile, BackgroundModes, ::testing::Values(0, 1, 2, 3, 4),
                         background_mode_name);

TEST_P(BackgroundModes, WritesKeepOrderAcrossBufferSizes) {
  // Pieces from 1 byte to several buffers long, pwrite and flush between
  // them: the committed file holds exactly the bytes in order.
  const bool direct = this->direct();
  const uint64_t direct_from = this->direct_from();
  a2test::TempDir dir;
  std::string path = dir / "bg.bin";
  std::mt19937_64 rng(5);
  std::vector<uint8_t> want;
  {
    AtomicFile f(path, /*background=*/true, direct, direct_from);
    EXPECT_EQ(f.direct(), direct && takes_o_direct(dir.path()));
    for (int i = 0; i < 300; ++i) {
      size_t len = i % 50 == 0 ? BackgroundWriter::kBufferBytes * 2 + 17 : rng() % 70000;
      std::vector<uint8_t> piece(len);
      for (auto& b : piece) b = static_cast<uint8_t>(rng());
      f.write(piece.data(), piece.size());
      want.insert(want.end(), piece.begin(), piece.end());
      if (i % 97 == 0) {
        // Flushed, the file holds exactly the bytes so far: the space the
        // O_DIRECT lane reserves ahead of its writes is given back.
        f.flush();
        EXPECT_EQ(std::filesystem::file_size(f.temp_path()), want.size()) << "piece " << i;
      }
    }
    EXPECT_EQ(f.bytes_written(), want.size());
    f.pwrite("AB", 2, 3);
    want[3] = 'A';
    want[4] = 'B';
    // A patch inside the partial last buffer, which then fills: with
    // O_DIRECT that buffer is written again, whole, and must carry it.
    const uint64_t at = want.size() - 1;
    f.pwrite("Z", 1, at);
    want[at] = 'Z';
    std::vector<uint8_t> more(BackgroundWriter::kBufferBytes + 5, 9);
    f.write(more.data(), more.size());
    want.insert(want.end(), more.begin(), more.end());
    EXPECT_FALSE(std::filesystem::exists(path));
    f.commit(false);
  }
  EXPECT_EQ(a2test::read_bytes(path), want);
  // Abandoned: nothing is left behind, even with writes still queued.
  {
    AtomicFile f(dir / "gone.bin", true, direct);
    std::vector<uint8_t> big(BackgroundWriter::kBufferBytes * 3, 7);
    f.write(big.data(), big.size());
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "gone.bin"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()), 1);
}

TEST(AtomicFile, AForkedChildNeitherWritesNorDeletesTheParentsFile) {
  // A child forked while a file is being written (say a Python worker
  // process finalising its copy of a bag writer) gets an error from every
  // write, flush and commit, and its destructor leaves the parent's
  // temporary file and writer thread alone; the parent then commits.
  a2test::TempDir dir;
  std::string path = dir / "shared.bin";
  for (bool background : {false, true}) {
    AtomicFile f(path, background);
    std::vector<uint8_t> part(300000, 5);
    f.write(part.data(), part.size());  // some of it still queued or buffered
    pid_t pid = ::fork();
    if (pid == 0) {
      int bad = 0;
      bad += a2test::status_of([&] { f.write("x", 1); }) == A2PACK_E_CLOSED ? 0 : 1;
      bad += a2test::status_of([&] { f.flush(); }) == A2PACK_E_CLOSED ? 0 : 1;
      bad += a2test::status_of([&] { f.commit(); }) == A2PACK_E_CLOSED ? 0 : 1;
      {
        AtomicFile* copy = &f;
        copy->~AtomicFile();  // what the child's finalizer would do
      }
      ::_exit(bad == 0 && !std::filesystem::exists(path) ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "background " << background;
    f.write(part.data(), part.size());
    f.commit(false);
    EXPECT_EQ(a2test::read_bytes(path).size(), 2 * part.size()) << "background " << background;
    std::filesystem::remove(path);
  }
}

TEST(AtomicFile, PageCacheWriteRoomIsWithinTheAvailableMemory) {
  // What a bag writer without fsync may hand the page cache before it goes
  // around it: below the kernel's dirty limit, so never more than the
  // memory available (0 where /proc does not say).
  const uint64_t room = page_cache_write_room();
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  uint64_t kb = 0, available = 0;
  while (meminfo >> name >> kb) {
    if (name == "MemAvailable:") available = kb << 10;
    meminfo.ignore(64, '\n');
  }
  if (available == 0) GTEST_SKIP() << "no MemAvailable in /proc/meminfo";
  EXPECT_LE(room, available);
}

// Feeds a chooser buffers from offset 0 on, each taking `buffered_ns` or
// `direct_ns` the way it went; returns the ways chosen ('b' or 'd').
std::string choices(WritePathChooser& c, int buffers, double buffered_ns, double direct_ns,
                    uint64_t first = 0) {
  std::string ways;
  for (int i = 0; i < buffers; ++i) {
    const bool direct = c.direct_for((first + i) * BackgroundWriter::kBufferBytes);
    c.took(direct, direct ? direct_ns : buffered_ns);
    ways += direct ? 'd' : 'b';
  }
  return ways;
}

TEST(WritePathChooser, KeepsThePageCacheWhereItIsFaster) {
  // Buffered at 4 GB/s, direct at 1.2: after the early probe, buffered, with
  // a probe of kProbeLength direct buffers every kProbeEvery.
  using C = WritePathChooser;
  C c(UINT64_MAX);
  const std::string ways = choices(c, 4 * C::kProbeEvery, 250e3, 850e3);
  EXPECT_EQ(ways.substr(0, 6), "bbddbb");
  EXPECT_EQ(std::count(ways.begin(), ways.end(), 'd'), 4 * C::kProbeLength) << ways;
  EXPECT_EQ(ways.substr(C::kBufferedFirst + C::kProbeEvery, 2), "dd");
}

TEST(WritePathChooser, GoesDirectWhereThePageCacheIsSlower) {
  // Page cache pages that fault on the host (0.65 GB/s) against the disk's
  // O_DIRECT (1.2 GB/s): direct from the probe on, with buffered probes.
  using C = WritePathChooser;
  C c(UINT64_MAX);
  const std::string ways = choices(c, 4 * C::kProbeEvery, 1.6e6, 850e3);
  EXPECT_EQ(ways.substr(0, 6), "bbdddd");
  EXPECT_EQ(std::count(ways.begin(), ways.end(), 'b'), 2 + 3 * C::kProbeLength) << ways;
}

TEST(WritePathChooser, FollowsAChangeAndIsDirectPastTheRoom) {
  using C = WritePathChooser;
  const int n = C::kProbeEvery;
  C c(100 * n * BackgroundWriter::kBufferBytes);
  auto count = [](const std::string& s, char way) { return std::count(s.begin(), s.end(), way); };
  choices(c, 2 * n, 250e3, 850e3);
  // The page cache slows down (the dirty limit reached, memory reclaimed):
  // from the next probe on the writer is on O_DIRECT, but for its probes.
  const std::string later = choices(c, 3 * n, 2e6, 850e3, 2 * n);
  EXPECT_LE(count(later.substr(n + C::kBufferedFirst), 'b'), 2 * C::kProbeLength) << later;
  // And back when it recovers.
  const std::string recovered = choices(c, 3 * n, 250e3, 850e3, 5 * n);
  EXPECT_LE(count(recovered.substr(n + C::kBufferedFirst), 'd'), 2 * C::kProbeLength) << recovered;
  // One slow buffer in a run of fast ones does not move it.
  std::string steady;
  for (int i = 0; i < n - 4; ++i) {
    const bool direct = c.direct_for((8 * n + i) * BackgroundWriter::kBufferBytes);
    c.took(direct, direct ? 850e3 : i == 10 ? 50e6 : 250e3);
    steady += direct ? 'd' : 'b';
  }
  EXPECT_LE(count(steady, 'd'), C::kProbeLength) << steady;  // a probe's
  // Past direct_from every buffer goes direct, whatever was measured.
  EXPECT_EQ(choices(c, 20, 1, 1e9, 100 * n), std::string(20, 'd'));
}

TEST(BackgroundWriter, DirectModeReopensTheDescriptorNeverThePath) {
  // The O_DIRECT descriptor is reopened from the given descriptor, never
  // from the path (which a link planted after the file was made could send
  // elsewhere): a path that names nothing changes nothing, and where the
  // file system refuses O_DIRECT the writer keeps writing through the given
  // descriptor. Either way every byte lands in place.
  a2test::TempDir dir;
  std::string path = dir / "plain.bin";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> want(BackgroundWriter::kBufferBytes * 2 + 100);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(i * 7);
  int probe = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  const bool fs_has_direct = probe >= 0;
  if (probe >= 0) ::close(probe);
  {
    BackgroundWriter w(fd, dir / "missing/plain.bin", /*direct=*/true);
    EXPECT_EQ(w.direct(), fs_has_direct);
    w.write(want.data(), want.size());
    w.drain();
  }
  ::close(fd);
  EXPECT_EQ(a2test::read_bytes(path), want);
}

TEST(BackgroundWriter, AWriteErrorSurfacesAtTheNextCallAndNamesTheFile) {
  // /dev/full fails every write with ENOSPC: the error comes back from
  // drain() (and every later call), never silently.
  int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  {
    BackgroundWriter w(fd, "/dev/full (test)");
    std::vector<uint8_t> data(1000, 1);
    w.write(data.data(), data.size());  // queued only: no error yet
    std::string msg;
    EXPECT_EQ(a2test::status_of([&] { w.drain(); }, &msg), A2PACK_E_IO) << msg;
    EXPECT_NE(msg.find("/dev/full (test)"), std::string::npos) << msg;
    // Later calls keep failing: small writes at once, and a whole buffer
    // handed over.
    EXPECT_NE(a2test::status_of([&] { w.write(data.data(), 10); }), A2PACK_OK);
    std::vector<uint8_t> big(BackgroundWriter::kBufferBytes + 1, 2);
    EXPECT_NE(a2test::status_of([&] { w.write(big.data(), big.size()); }), A2PACK_OK);
    EXPECT_NE(a2test::status_of([&] { w.drain(); }), A2PACK_OK);
  }
  ::close(fd);
}

TEST(Files, ErrorsNameThePath) {
  try {
    read_file("/nonexistent/a2pack/file");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/a2pack/file"), std::string::npos);
  }
}
