// Data logger under damage: processes SIGKILLed while recording, torn tails,
// flipped bytes, garbage, missing or broken sidecars, random mutations.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "base/error.hpp"
#include "logger/decoder.hpp"
#include "logger/logger.hpp"
#include "logger/segment.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::logger;
namespace fs = std::filesystem;

namespace {

// Record `seq` of stream `s`: small, exactly representable on the chosen
// scales, so a decoded record can be compared for equality.
void fill(uint32_t s, uint64_t seq, std::vector<uint32_t>& idx, std::vector<double>& val) {
  idx.clear();
  val.clear();
  size_t n = (seq * 7 + s) % 13;
  for (size_t i = 0; i < n; ++i) {
    idx.push_back(static_cast<uint32_t>(i * 3 + seq % 5));
    val.push_back(static_cast<double>(static_cast<int64_t>(seq * 31 + i) - 50) * 0.5);
  }
}

bool matches(const Decoded& d, size_t r, uint32_t s, uint64_t seq) {
  std::vector<uint32_t> idx;
  std::vector<double> val;
  fill(s, seq, idx, val);
  size_t a = d.offsets[r], b = d.offsets[r + 1];
  if (d.stream_ids[r] != s || d.epochs[r] != static_cast<double>(seq) || b - a != idx.size())
    return false;
  for (size_t i = 0; i < idx.size(); ++i)
    if (d.indices[a + i] != idx[i] || d.values[a + i] != val[i]) return false;
  return true;
}

// Write a log of `n` records on one stream and return the folder's segment paths.
std::vector<std::string> write_log(const std::string& dir, uint64_t n, uint32_t frame = 4096) {
  Options o;
  o.frame_bytes = frame;
  o.rotate_bytes = 1 << 30;
  Logger lg(dir, o);
  uint32_t s = lg.register_stream("{}", 1.0, 0.5, 0);
  std::vector<uint32_t> idx;
  std::vector<double> val;
  for (uint64_t i = 0; i < n; ++i) {
    fill(s, i, idx, val);
    lg.record(s, static_cast<double>(i), idx.data(), val.data(), idx.size());
  }
  lg.close();
  std::vector<std::string> paths;
  for (uint32_t k : list_segments(dir + "/segments"))
    paths.push_back(dir + "/segments/" + segment_name(k));
  return paths;
}

std::vector<FrameRef> frames_of(const std::string& path) {
  auto bytes = a2test::read_bytes(path);
  std::vector<FrameRef> f;
  std::vector<Problem> p;
  scan_segment(bytes.data(), bytes.size(), path, 0, f, p);
  EXPECT_TRUE(p.empty());
  return f;
}

// Every decoded record is (0, seq) for distinct seqs; returns the seqs.
std::vector<uint64_t> seqs_of(const Decoded& d) {
  std::vector<uint64_t> out;
  for (size_t r = 0; r < d.n_records(); ++r) {
    uint64_t seq = static_cast<uint64_t>(d.epochs[r]);
    EXPECT_TRUE(matches(d, r, 0, seq)) << "record " << r;
    out.push_back(seq);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- crash test

// A child process records from two threads, flushing at random points and
// reporting each completed flush through a pipe; the parent SIGKILLs it at a
// random moment. Every record flushed before the kill must decode, nothing
// may be garbled, and each stream must come back as an unbroken prefix.
TEST(LoggerCrash, SigkillAtRandomPointsLosesNothingFlushed) {
  const int kIterations = 40;
  std::mt19937_64 rng(20240501);
  int torn_tails = 0, total_records = 0;
  for (int it = 0; it < kIterations; ++it) {
    a2test::TempDir tmp;
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    uint64_t child_seed = rng();
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      try {
        Options o;
        o.frame_bytes = 4096;
        o.rotate_bytes = 48 << 10;
        o.flush_interval_ms = 3;
        Logger lg(tmp.path(), o);
        uint32_t s0 = lg.register_stream("{\"t\":0}", 1.0, 0.5, 0);
        uint32_t s1 = lg.register_stream("{\"t\":1}", 1.0, 0.5, 0);
        auto body = [&](uint32_t s, uint64_t seed) {
          std::mt19937_64 r(seed);
          std::vector<uint32_t> idx;
          std::vector<double> val;
          uint64_t next_flush = r() % 400;
          for (uint64_t i = 0; i < 2'000'000; ++i) {
            fill(s, i, idx, val);
            lg.record(s, static_cast<double>(i), idx.data(), val.data(), idx.size());
            if (i == next_flush) {
              lg.flush();
              uint64_t msg = (uint64_t{s} << 40) | (i + 1);
              if (::write(fds[1], &msg, sizeof msg) != sizeof msg) ::_exit(3);
              next_flush = i + 1 + r() % 800;
            }
          }
        };
        std::thread t1(body, s1, child_seed + 1);
        body(s0, child_seed);
        t1.join();
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 40000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child ended by itself, status " << status;
    std::map<uint32_t, uint64_t> flushed;
    uint64_t msg;
    while (::read(fds[0], &msg, sizeof msg) == sizeof msg)
      flushed[static_cast<uint32_t>(msg >> 40)] = msg & ((uint64_t{1} << 40) - 1);
    ::close(fds[0]);
    if (!fs::exists(tmp / "segments")) {
      EXPECT_TRUE(flushed.empty());
      continue;
    }
    Decoded d = decode_dir(tmp.path(), {1, false});
    for (const auto& p : d.problems) {
      // Only the newest segment may be torn, and only at its end.
      auto segs = list_segments(tmp / "segments");
      EXPECT_EQ(p.path, tmp / ("segments/" + segment_name(segs.back()))) << p.message;
      ++torn_tails;
    }
    std::map<uint32_t, uint64_t> next;
    for (size_t r = 0; r < d.n_records(); ++r) {
      uint32_t s = d.stream_ids[r];
      ASSERT_LT(s, 2u);
      uint64_t seq = next[s]++;
      ASSERT_TRUE(matches(d, r, s, seq)) << "iteration " << it << " record " << r;
    }
    for (auto [s, n] : flushed)
      EXPECT_GE(next[s], n) << "iteration " << it << ": stream " << s << " flushed " << n
                            << " records, " << next[s] << " decoded";
    total_records += static_cast<int>(d.n_records());
  }
  EXPECT_GT(total_records, 0);
  RecordProperty("torn_tails", torn_tails);
}

// ---------------------------------------------------------------- damage

TEST(LoggerDamage, TruncatedTailKeepsEveryWholeFrame) {
  a2test::TempDir tmp;
  auto paths = write_log(tmp.path(), 3000);
  ASSERT_EQ(paths.size(), 1u);
  auto frames = frames_of(paths[0]);
  ASSERT_GT(frames.size(), 4u);
  auto full = a2test::read_bytes(paths[0]);
  std::mt19937_64 rng(7);
  for (int k = 0; k < 25; ++k) {
    size_t cut = 1 + rng() % (full.size() - 1);
    a2test::write_bytes(paths[0], full.data(), cut);
    size_t whole = 0;
    uint64_t torn_at = 0;
    bool torn = false;
    for (const auto& f : frames) {
      if (f.offset + kHeaderSize + f.header.compressed_len <= cut) {
        ++whole;
      } else if (!torn) {
        torn = f.offset < cut;
        torn_at = f.offset;
      }
    }
    Decoded d = decode_dir(tmp.path(), {});
    EXPECT_EQ(d.frames, whole);  // the closing frame, last, is never whole: cut < size
    // A cut inside a frame is a torn frame; one exactly between frames
    // leaves the segment without its closing frame: reported as well.
    ASSERT_EQ(d.problems.size(), 1u) << "cut at " << cut;
    EXPECT_EQ(d.problems[0].path, paths[0]);
    if (torn) {
      EXPECT_EQ(d.problems[0].offset, torn_at);
    } else {
      EXPECT_EQ(d.problems[0].offset, cut);
      EXPECT_NE(d.problems[0].message.find("without its closing frame"), std::string::npos)
          << d.problems[0].message;
    }
    auto seqs = seqs_of(d);
    for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], i);
    EXPECT_THROW(decode_dir(tmp.path(), {0, true}), Error);
  }
}

TEST(LoggerDamage, FlippedPayloadByteSkipsOnlyThatFrame) {
  a2test::TempDir tmp;
  auto paths = write_log(tmp.path(), 3000);
  auto frames = frames_of(paths[0]);
  auto bytes = a2test::read_bytes(paths[0]);
  const FrameRef& victim = frames[2];
  bytes[victim.offset + kHeaderSize + victim.header.compressed_len / 2] ^= 0x10;
  a2test::write_bytes(paths[0], bytes.data(), bytes.size());
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_EQ(d.problems[0].status, A2PACK_E_CHECKSUM);
  EXPECT_EQ(d.problems[0].offset, victim.offset);
  EXPECT_EQ(d.problems[0].path, paths[0]);
  EXPECT_EQ(d.frames, frames.size() - 2);  // less the bad one and the closing frame
  EXPECT_EQ(d.n_records(), 3000u - victim.header.n_records);
  // The frames after the bad one decode with correct epochs: every frame is
  // self-contained.
  seqs_of(d);
  try {
    decode_dir(tmp.path(), {0, true});
    FAIL() << "strict decode accepted a bad frame";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(paths[0]), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(std::to_string(victim.offset)), std::string::npos);
  }
}

TEST(LoggerDamage, BrokenHeaderAndGarbageAreSkippedByResync) {
  a2test::TempDir tmp;
  auto paths = write_log(tmp.path(), 3000);
  auto frames = frames_of(paths[0]);
  auto bytes = a2test::read_bytes(paths[0]);
  // Break frame 1's header length field and insert garbage before frame 4.
  bytes[frames[1].offset + 17] ^= 0xFF;
  std::vector<uint8_t> garbage(777, 0x5A);
  bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(frames[4].offset), garbage.begin(),
               garbage.end());
  a2test::write_bytes(paths[0], bytes.data(), bytes.size());
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 2u);
  EXPECT_EQ(d.problems[0].offset, frames[1].offset);
  EXPECT_EQ(d.problems[0].status, A2PACK_E_CHECKSUM);
  EXPECT_EQ(d.problems[1].offset, frames[4].offset);
  EXPECT_EQ(d.frames, frames.size() - 2);  // less the bad one and the closing frame
  EXPECT_EQ(d.n_records(), 3000u - frames[1].header.n_records);
  seqs_of(d);
}

TEST(LoggerDamage, SidecarProblemsSkipOnlyThatStream) {
  a2test::TempDir tmp;
  {
    Logger lg(tmp.path(), Options{});
    uint32_t a = lg.register_stream("{}", 1.0, 1.0, 0);
    uint32_t b = lg.register_stream("{}", 1.0, 1.0, 0);
    uint32_t c = lg.register_stream("{}", 1.0, 1.0, 0);
    uint32_t i = 1;
    double v = 2;
    for (uint32_t s : {a, b, c, a}) lg.record(s, 1.0, &i, &v, 1);
  }
  fs::remove(tmp / "streams/1.json");
  a2test::write_bytes(tmp / "streams/2.json", "{\"stream_id\": 2", 15);
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_EQ(d.n_records(), 2u);
  ASSERT_EQ(d.problems.size(), 2u);
  EXPECT_EQ(d.problems[0].path, tmp / "streams/2.json");
  EXPECT_EQ(d.problems[0].status, A2PACK_E_CORRUPT);
  EXPECT_EQ(d.problems[1].status, A2PACK_E_NOT_FOUND);
  EXPECT_NE(d.problems[1].message.find("2 records skipped"), std::string::npos)
      << d.problems[1].message;
}

TEST(LoggerDamage, EmptyAndMissingFolders) {
  a2test::TempDir tmp;
  EXPECT_THROW(decode_dir(tmp / "nope", {}), Error);
  fs::create_directories(tmp / "log/segments");
  Decoded d = decode_dir(tmp / "log", {});
  EXPECT_EQ(d.n_records(), 0u);
  // A segment created just before a crash, still empty: nothing to report.
  a2test::write_bytes(tmp / "log/segments/00000.seg.zst", "", 0);
  d = decode_dir(tmp / "log", {});
  EXPECT_EQ(d.segments, 1u);
  EXPECT_TRUE(d.problems.empty());
  fs::remove_all(tmp / "log/segments");
  EXPECT_THROW(decode_dir(tmp / "log", {}), Error);
}

TEST(LoggerDamage, RandomMutationsNeverCrashTheDecoder) {
  a2test::TempDir tmp;
  auto paths = write_log(tmp.path(), 1500);
  auto clean = a2test::read_bytes(paths[0]);
  std::mt19937_64 rng(99);
  for (int k = 0; k < 60; ++k) {
    auto bytes = clean;
    int muts = 1 + static_cast<int>(rng() % 8);
    for (int m = 0; m < muts; ++m) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    a2test::write_bytes(paths[0], bytes.data(), bytes.size());
    Decoded d = decode_dir(tmp.path(), {});
    // Whatever survives is genuine: intact frames only.
    for (size_t r = 0; r < d.n_records(); ++r)
      ASSERT_TRUE(matches(d, r, 0, static_cast<uint64_t>(d.epochs[r])));
  }
}

// A forked child holds the parent's logger without its threads: every use
// fails cleanly (no hang, no abort), and the parent's logger is unaffected.
TEST(LoggerCrash, AForkedChildCannotUseTheParentsLogger) {
  a2test::TempDir tmp;
  auto* lg = new Logger(tmp.path(), Options{});
  uint32_t s = lg->register_stream("{}", 1.0, 0.5, 0);
  std::vector<uint32_t> idx;
  std::vector<double> val;
  fill(s, 0, idx, val);
  lg->record(s, 0.0, idx.data(), val.data(), idx.size());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    try {
      lg->record(s, 1.0, idx.data(), val.data(), idx.size());
      code |= 1;
    } catch (const Error& e) {
      if (e.status() != A2PACK_E_CLOSED) code |= 2;
    }
    try {
      lg->flush();
      code |= 4;
    } catch (const Error& e) {
      if (e.status() != A2PACK_E_CLOSED) code |= 8;
    }
    lg->close();  // returns at once; the child leaks the object (see Logger::forked)
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "child died: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  fill(s, 1, idx, val);
  lg->record(s, 1.0, idx.data(), val.data(), idx.size());
  delete lg;
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.n_records(), 2u);
  EXPECT_TRUE(matches(d, 0, s, 0));
  EXPECT_TRUE(matches(d, 1, s, 1));
}
