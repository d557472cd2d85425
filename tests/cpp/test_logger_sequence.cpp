// Data logger, third hardening pass: frames
// that expand too far for their size, the frame sequence (lost, duplicated,
// reordered, foreign frames; segments cut at a frame boundary, killed
// loggers and the resume marker), files in segments/ that are not read.
// Every damaged input is made here from a log the test writes.
#include <gtest/gtest.h>

#include <zstd.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "logger/decoder.hpp"
#include "logger/logger.hpp"
#include "logger/segment.hpp"
#include "logger/sequence.hpp"
#include "test_logger_util.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::logger;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

// Record i of stream s: epoch i, non-zeros exact at scale 0.5.
void fill(uint32_t s, uint64_t i, std::vector<uint32_t>& idx, std::vector<double>& val) {
  idx.clear();
  val.clear();
  for (size_t k = 0; k < (i * 5 + s) % 9; ++k) {
    idx.push_back(static_cast<uint32_t>(k * 2 + i % 3));
    val.push_back(static_cast<double>(static_cast<int64_t>(i * 7 + k) - 40) * 0.5);
  }
}

// `n` records on each of two streams in frames of ~4 KiB.
void write_log(const std::string& dir, uint64_t n, uint64_t rotate = 1 << 30,
               uint64_t first = 0) {
  Options o;
  o.frame_bytes = 4096;
  o.rotate_bytes = rotate;
  Logger lg(dir, o);
  if (first == 0) {
    lg.register_stream("{\"s\":\"a\"}", 1.0, 0.5, 0);
    lg.register_stream("{\"s\":\"b\"}", 1.0, 0.5, 0);
  }
  std::vector<uint32_t> idx;
  std::vector<double> val;
  for (uint64_t i = first; i < first + n; ++i)
    for (uint32_t s : {0u, 1u}) {
      fill(s, i, idx, val);
      lg.record(s, static_cast<double>(i), idx.data(), val.data(), idx.size());
    }
  lg.close();
}

std::string seg(const std::string& dir, uint32_t k) {
  return dir + "/segments/" + segment_name(k);
}

std::vector<FrameRef> blocks_of(const Bytes& b) {
  std::vector<FrameRef> f;
  std::vector<Problem> p;
  scan_segment(b.data(), b.size(), "x", 0, f, p);
  EXPECT_TRUE(p.empty());
  return f;
}

uint64_t block_end(const FrameRef& f) {
  return f.offset + f.header.size() + f.header.compressed_len;
}

Bytes block(const Bytes& b, const FrameRef& f) {
  return Bytes(b.begin() + static_cast<ptrdiff_t>(f.offset),
               b.begin() + static_cast<ptrdiff_t>(block_end(f)));
}

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// Strict decoding fails naming the file and the offset.
void expect_strict_fails(const std::string& dir, const std::string& path, uint64_t offset) {
  DecodeOptions o;
  o.strict = true;
  try {
    decode_dir(dir, o);
    ADD_FAILURE() << "strict decode passed";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), path)) << e.what();
    EXPECT_TRUE(has(e.what(), "offset " + std::to_string(offset))) << e.what();
  }
}

std::string all_messages(const Decoded& d) {
  std::string s;
  for (const auto& p : d.problems) s += p.path + " @" + std::to_string(p.offset) + ": " + p.message + "\n";
  return s;
}

}  // namespace

// ------------------------------------------------ 1. amplification

namespace {

// A segment of `frames` valid, checksummed version-3 frames that each
// declare `n` empty records of stream 0 (3 bytes each: zstd shrinks them to
// almost nothing), and its closing frame.
Bytes empty_record_bomb(uint32_t frames, uint32_t n) {
  std::string raw(4 + size_t{3} * n, '\0');
  le::store<uint32_t>(reinterpret_cast<uint8_t*>(raw.data()), 3 * n);  // version 2's structure_len
  Bytes z(ZSTD_compressBound(raw.size()));
  size_t zn = ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 3);
  EXPECT_FALSE(ZSTD_isError(zn));
  z.resize(zn);
  Bytes out;
  for (uint32_t k = 0; k < frames; ++k) {
    BlockHeader h;
    h.compressed_len = static_cast<uint32_t>(zn);
    h.raw_len = static_cast<uint32_t>(raw.size());
    h.n_records = n;
    h.payload_crc = crc32c::compute(z.data(), zn);
    h.seq = k;
    h.count = uint64_t{k} * n;
    uint8_t hb[kHeaderSize];
    write_header(hb, h);
    out.insert(out.end(), hb, hb + kHeaderSize);
    out.insert(out.end(), z.begin(), z.end());
  }
  BlockHeader c;
  c.flags = kFlagClose;
  c.seq = frames;
  c.count = uint64_t{frames} * n;
  uint8_t hb[kHeaderSize];
  write_header(hb, c);
  out.insert(out.end(), hb, hb + kHeaderSize);
  return out;
}

void sidecar_only(const std::string& dir) {
  Logger lg(dir, Options{});
  lg.register_stream("{}", 1.0, 1.0, 0);
  lg.close();  // nothing recorded: no segment
}

}  // namespace

TEST(LoggerAmplification, EmptyRecordFramesAreRefusedForTheirSize) {
  a2test::TempDir tmp;
  sidecar_only(tmp.path());
  // A hostile folder: eight frames of 16 777 215 empty records each
  // (134 M records, 2.7 GB of columns) in a few kilobytes.
  Bytes bomb = empty_record_bomb(8, 16'777'215);
  ASSERT_LT(bomb.size(), 64u << 10);
  a2test::write_bytes(seg(tmp.path(), 0), bomb.data(), bomb.size());
  auto frames = blocks_of(bomb);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Under an address-space limit far below what the claims would take.
  EXPECT_EQ(a2test::decode_under_address_limit(
                tmp.path(), uint64_t{1} << 30, [](const Decoded& d) { return d.problems.size() == 8 && d.n_records() == 0; }),
            0);
#endif
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_EQ(d.n_records(), 0u);
  EXPECT_EQ(d.bad_frames, 8u);
  ASSERT_EQ(d.problems.size(), 8u) << all_messages(d);
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(d.problems[k].path, seg(tmp.path(), 0));
    EXPECT_EQ(d.problems[k].offset, frames[k].offset);
    EXPECT_EQ(d.problems[k].status, A2PACK_E_OUT_OF_RANGE);
    EXPECT_TRUE(has(d.problems[k].message, "max_expansion")) << d.problems[k].message;
  }
  expect_strict_fails(tmp.path(), seg(tmp.path(), 0), frames[0].offset);
}

TEST(LoggerAmplification, ACallerWhoRaisesTheLimitGetsTheRecords) {
  a2test::TempDir tmp;
  sidecar_only(tmp.path());
  Bytes bomb = empty_record_bomb(2, 100'000);
  a2test::write_bytes(seg(tmp.path(), 0), bomb.data(), bomb.size());
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_EQ(d.n_records(), 0u);
  EXPECT_EQ(d.problems.size(), 2u);
  DecodeOptions o;
  o.max_expansion = uint64_t{1} << 20;
  d = decode_dir(tmp.path(), o);
  EXPECT_TRUE(d.problems.empty()) << all_messages(d);
  EXPECT_EQ(d.n_records(), 200'000u);
  EXPECT_EQ(d.offsets.back(), 0u);
  // What the logger itself writes stays far below the default.
  a2test::TempDir real;
  write_log(real.path(), 3000);
  DecodeOptions tight;
  tight.max_expansion = 16;
  d = decode_dir(real.path(), tight);
  EXPECT_TRUE(d.problems.empty()) << all_messages(d);
  EXPECT_EQ(d.n_records(), 6000u);
}

TEST(LoggerAmplification, TheLoggerNeverWritesWhatTheDefaultRefuses) {
  // The same record over and over (a quiet sensor): zstd shrinks a 256 KiB
  // frame of it to a few dozen bytes; the writer pads it back within limits.
  a2test::TempDir tmp;
  {
    Logger lg(tmp.path(), Options{});
    uint32_t s = lg.register_stream("{}", 1.0, 1.0, 0);
    std::vector<uint32_t> idx(16);
    std::vector<double> val(16, 1.0);
    for (uint32_t k = 0; k < 16; ++k) idx[k] = k;
    for (uint64_t i = 0; i < 100'000; ++i) lg.record(s, 0.0, idx.data(), val.data(), 16);
    lg.record(s, 0.0, nullptr, nullptr, 0);
    lg.close();
  }
  Bytes b = a2test::read_bytes(seg(tmp.path(), 0));
  uint64_t raw = 0;
  for (const auto& f : blocks_of(b)) {
    EXPECT_LE(f.header.raw_len, kWriterMaxExpansion * (f.header.size() + f.header.compressed_len));
    raw += f.header.raw_len;
  }
  DecodeOptions strict;
  strict.strict = true;
  Decoded d = decode_dir(tmp.path(), strict);
  EXPECT_EQ(d.n_records(), 100'001u);
  // Still one plain zstd stream: the padding is a skippable frame.
  Bytes plain(raw + 1);
  size_t n = ZSTD_decompress(plain.data(), plain.size(), b.data(), b.size());
  ASSERT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  EXPECT_EQ(n, raw);
}

// ------------------------------------------------ 6. frame sequence

TEST(LoggerSequence, ACleanCloseEndsWithAClosingFrameAndDecodesWithoutProblems) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000, 16 << 10);
  auto ids = list_segments(tmp / "segments");
  ASSERT_GE(ids.size(), 3u);
  for (uint32_t k : ids) {
    auto b = a2test::read_bytes(seg(tmp.path(), k));
    auto f = blocks_of(b);
    ASSERT_GE(f.size(), 2u);
    EXPECT_EQ(f.back().header.flags, kFlagClose) << k;
    EXPECT_EQ(block_end(f.back()), b.size());
    for (size_t i = 0; i + 1 < f.size(); ++i) {
      EXPECT_EQ(f[i].header.segment, k);
      EXPECT_EQ(f[i].header.seq, i);
    }
  }
  DecodeOptions o;
  o.strict = true;
  Decoded d = decode_dir(tmp.path(), o);
  EXPECT_EQ(d.n_records(), 6000u);
}

TEST(LoggerSequence, ARemovedFrameIsReportedWithSegmentOffsetAndRecords) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000);
  std::string path = seg(tmp.path(), 0);
  Bytes b = a2test::read_bytes(path);
  auto f = blocks_of(b);
  ASSERT_GT(f.size(), 10u);
  const FrameRef victim = f[5];
  b.erase(b.begin() + static_cast<ptrdiff_t>(victim.offset),
          b.begin() + static_cast<ptrdiff_t>(block_end(victim)));
  a2test::write_bytes(path, b.data(), b.size());
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_EQ(d.problems[0].path, path);
  EXPECT_EQ(d.problems[0].offset, victim.offset);  // where frame 6 now lies
  EXPECT_EQ(d.problems[0].status, A2PACK_E_NOT_FOUND);
  EXPECT_TRUE(has(d.problems[0].message,
                  fmt::format("frame 5 of the segment ({} records) missing", victim.header.n_records)))
      << d.problems[0].message;
  EXPECT_EQ(d.n_records(), 6000u - victim.header.n_records);
  expect_strict_fails(tmp.path(), path, victim.offset);
}

TEST(LoggerSequence, ADuplicatedFrameIsReportedAndDecodedOnce) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000);
  std::string path = seg(tmp.path(), 0);
  Bytes b = a2test::read_bytes(path);
  auto f = blocks_of(b);
  Bytes copy = block(b, f[3]);
  b.insert(b.begin() + static_cast<ptrdiff_t>(block_end(f[3])), copy.begin(), copy.end());
  a2test::write_bytes(path, b.data(), b.size());
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_EQ(d.problems[0].offset, block_end(f[3]));
  EXPECT_TRUE(has(d.problems[0].message, "frame 3 again")) << d.problems[0].message;
  EXPECT_EQ(d.n_records(), 6000u);  // not twice
  EXPECT_EQ(d.bad_frames, 1u);
  expect_strict_fails(tmp.path(), path, block_end(f[3]));
}

TEST(LoggerSequence, ReorderedFramesAreReportedNotCalledLost) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000);
  std::string path = seg(tmp.path(), 0);
  Bytes b = a2test::read_bytes(path);
  auto f = blocks_of(b);
  // Swap frames 2 and 3.
  Bytes f2 = block(b, f[2]), f3 = block(b, f[3]);
  Bytes out(b.begin(), b.begin() + static_cast<ptrdiff_t>(f[2].offset));
  out.insert(out.end(), f3.begin(), f3.end());
  out.insert(out.end(), f2.begin(), f2.end());
  out.insert(out.end(), b.begin() + static_cast<ptrdiff_t>(block_end(f[3])), b.end());
  a2test::write_bytes(path, out.data(), out.size());
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  const uint64_t at = f[2].offset + f3.size();
  EXPECT_EQ(d.problems[0].offset, at);
  EXPECT_TRUE(has(d.problems[0].message, "frame 2 follows frame 3")) << d.problems[0].message;
  EXPECT_EQ(d.n_records(), 6000u);
  expect_strict_fails(tmp.path(), path, at);
}

TEST(LoggerSequence, ASegmentCutAtAFrameBoundaryIsACut) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000);
  std::string path = seg(tmp.path(), 0);
  const Bytes full = a2test::read_bytes(path);
  auto f = blocks_of(full);
  ASSERT_EQ(f.back().header.flags, kFlagClose);
  // Only the closing frame gone; then the last data frame too (35 frames
  // -> 34, say).
  for (size_t keep : {f.size() - 1, f.size() - 2}) {
    const uint64_t cut = f[keep].offset;
    a2test::write_bytes(path, full.data(), cut);
    Decoded d = decode_dir(tmp.path(), {});
    ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
    EXPECT_EQ(d.problems[0].path, path);
    EXPECT_EQ(d.problems[0].offset, cut);
    EXPECT_EQ(d.problems[0].status, A2PACK_E_CORRUPT);
    EXPECT_TRUE(has(d.problems[0].message, "without its closing frame")) << d.problems[0].message;
    expect_strict_fails(tmp.path(), path, cut);
  }
}

TEST(LoggerSequence, ACutAtTheEndOfAnOlderSegmentIsReported) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000, 16 << 10);
  ASSERT_GE(list_segments(tmp / "segments").size(), 3u);
  std::string path = seg(tmp.path(), 1);
  Bytes b = a2test::read_bytes(path);
  auto f = blocks_of(b);
  const uint64_t cut = f[f.size() - 3].offset;  // two data frames and the closing frame
  a2test::write_bytes(path, b.data(), cut);
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_EQ(d.problems[0].path, path);
  EXPECT_EQ(d.problems[0].offset, cut);
  EXPECT_TRUE(has(d.problems[0].message, "00002.seg.zst does not begin by resuming it"))
      << d.problems[0].message;
  expect_strict_fails(tmp.path(), path, cut);
}

TEST(LoggerSequence, ACopiedOrRenamedSegmentIsReported) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000, 16 << 10);
  auto ids = list_segments(tmp / "segments");
  const uint32_t next = ids.back() + 1;
  fs::copy_file(seg(tmp.path(), 1), seg(tmp.path(), next));
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_EQ(d.problems[0].path, seg(tmp.path(), next));
  EXPECT_EQ(d.problems[0].offset, 0u);
  EXPECT_TRUE(has(d.problems[0].message, "written into segment 00001.seg.zst")) << d.problems[0].message;
  EXPECT_EQ(d.n_records(), 6000u);  // its records are not decoded twice
  expect_strict_fails(tmp.path(), seg(tmp.path(), next), 0);
}

TEST(LoggerSequence, BlocksAfterTheClosingFrameAreReported) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 1000);
  std::string path = seg(tmp.path(), 0);
  Bytes b = a2test::read_bytes(path);
  auto f = blocks_of(b);
  const uint64_t at = b.size();
  Bytes copy = block(b, f[0]);
  b.insert(b.end(), copy.begin(), copy.end());
  a2test::write_bytes(path, b.data(), b.size());
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_EQ(d.problems[0].offset, at);
  EXPECT_TRUE(has(d.problems[0].message, "after the segment's closing frame")) << d.problems[0].message;
  EXPECT_EQ(d.n_records(), 2000u);
}

TEST(LoggerSequence, ADamagedFrameSaysWhatWasLostWithIt) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000);
  std::string path = seg(tmp.path(), 0);
  Bytes b = a2test::read_bytes(path);
  auto f = blocks_of(b);
  b[f[4].offset + 17] ^= 0xFF;  // header CRC fails: the scan skips to frame 5
  a2test::write_bytes(path, b.data(), b.size());
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);  // one problem, not a second for the gap
  EXPECT_EQ(d.problems[0].offset, f[4].offset);
  EXPECT_EQ(d.problems[0].status, A2PACK_E_CHECKSUM);
  EXPECT_TRUE(has(d.problems[0].message,
                  fmt::format("frame 4 of the segment ({} records) lost with it", f[4].header.n_records)))
      << d.problems[0].message;
}

TEST(LoggerSequence, AKilledLoggerThenAReopenIsANoteAndALaterCutIsNot) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 2000);
  std::string path = seg(tmp.path(), 0);
  Bytes b = a2test::read_bytes(path);
  auto f = blocks_of(b);
  // What a logger killed between two frames leaves: no closing frame.
  const uint64_t kill_at = f[f.size() - 2].offset;
  a2test::write_bytes(path, b.data(), kill_at);
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_FALSE(d.problems[0].note);
  // A logger reopens the folder: its first segment begins with a resume
  // marker that records segment 0 as it found it.
  write_log(tmp.path(), 10, 1 << 30, 5000);
  auto nb = a2test::read_bytes(seg(tmp.path(), 1));
  auto nf = blocks_of(nb);
  ASSERT_GE(nf.size(), 3u);
  EXPECT_EQ(nf[0].header.flags, kFlagResume);
  EXPECT_EQ(nf[0].header.seq, 0u);
  EXPECT_EQ(nf[0].header.count, kill_at);
  d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_TRUE(d.problems[0].note);
  EXPECT_EQ(d.problems[0].status, A2PACK_OK);
  EXPECT_EQ(d.problems[0].path, path);
  EXPECT_TRUE(has(d.problems[0].message, "its logger was killed")) << d.problems[0].message;
  EXPECT_EQ(d.n_records(), 4000u - f[f.size() - 2].header.n_records + 20);
  expect_strict_fails(tmp.path(), path, kill_at);
  // Cut further after the reopen: that is damage, not the kill.
  const uint64_t cut = f[f.size() - 3].offset;
  a2test::write_bytes(path, b.data(), cut);
  d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_FALSE(d.problems[0].note);
  EXPECT_EQ(d.problems[0].offset, cut);
  EXPECT_TRUE(has(d.problems[0].message, "cut since")) << d.problems[0].message;
}

TEST(LoggerSequence, ASigkilledLoggerReopenedLeavesOnlyNotesAndTornTails) {
  for (int round = 0; round < 4; ++round) {
    a2test::TempDir tmp;
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        Options o;
        o.frame_bytes = 4096;
        o.rotate_bytes = 32 << 10;
        Logger lg(tmp.path(), o);
        uint32_t s = lg.register_stream("{}", 1.0, 0.5, 0);
        lg.register_stream("{}", 1.0, 0.5, 0);  // the next incarnation records both
        std::vector<uint32_t> idx;
        std::vector<double> val;
        for (uint64_t i = 0;; ++i) {
          fill(s, i, idx, val);
          lg.record(s, static_cast<double>(i), idx.data(), val.data(), idx.size());
          if (i % 500 == 499) lg.flush();
        }
      } catch (...) {
        ::_exit(2);
      }
    }
    ::usleep(20'000 + 15'000 * static_cast<useconds_t>(round));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    if (list_segments(tmp / "segments").empty()) continue;
    write_log(tmp.path(), 10, 1 << 30, 1u << 20);  // the next incarnation, closed cleanly
    Decoded d = decode_dir(tmp.path(), {});
    for (const auto& p : d.problems)
      EXPECT_TRUE(p.note || has(p.message, "truncated frame") || has(p.message, "trailing bytes"))
          << p.path << ": " << p.message;
  }
}

TEST(LoggerSequence, AnOpenLoggersNewestSegmentIsNotACut) {
  a2test::TempDir tmp;
  Options o;
  o.frame_bytes = 4096;
  Logger lg(tmp.path(), o);
  uint32_t s = lg.register_stream("{}", 1.0, 0.5, 0);
  std::vector<uint32_t> idx;
  std::vector<double> val;
  for (uint64_t i = 0; i < 2000; ++i) {
    fill(s, i, idx, val);
    lg.record(s, static_cast<double>(i), idx.data(), val.data(), idx.size());
  }
  lg.flush();
  EXPECT_TRUE(folder_in_use(tmp.path()));
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_TRUE(d.problems.empty()) << all_messages(d);
  EXPECT_EQ(d.n_records(), 2000u);
  lg.close();
  EXPECT_FALSE(folder_in_use(tmp.path()));
  d = decode_dir(tmp.path(), {});
  EXPECT_TRUE(d.problems.empty()) << all_messages(d);
}

TEST(LoggerSequence, SegmentsOfTheOlderFormatStillDecodeUnchecked) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000);
  std::string path = seg(tmp.path(), 0);
  Decoded want = decode_dir(tmp.path(), {});
  // Rewrite the segment as an older writer wrote it: 40-byte version-2
  // headers, no sequence, no closing frame.
  Bytes b = a2test::read_bytes(path);
  Bytes old;
  for (const auto& f : blocks_of(b)) {
    if (f.header.marker()) continue;
    BlockHeader h = f.header;
    h.version = 2;
    uint8_t hb[kHeaderSizeV2];
    write_header(hb, h);
    old.insert(old.end(), hb, hb + kHeaderSizeV2);
    const auto* p = b.data() + f.offset + kHeaderSize;
    old.insert(old.end(), p, p + h.compressed_len);
  }
  a2test::write_bytes(path, old.data(), old.size());
  DecodeOptions strict;
  strict.strict = true;
  Decoded d = decode_dir(tmp.path(), strict);
  ASSERT_EQ(d.n_records(), want.n_records());
  EXPECT_EQ(std::vector<double>(d.values.begin(), d.values.end()),
            std::vector<double>(want.values.begin(), want.values.end()));
  // A reopened old folder goes on in the new format; both decode.
  write_log(tmp.path(), 10, 1 << 30, 7000);
  d = decode_dir(tmp.path(), strict);
  EXPECT_EQ(d.n_records(), want.n_records() + 20);
  // A version-2 frame spliced into a version-3 segment is reported.
  Bytes nb = a2test::read_bytes(seg(tmp.path(), 1));
  auto nf = blocks_of(nb);
  Bytes spliced(old.begin(), old.begin() + static_cast<ptrdiff_t>(blocks_of(old)[1].offset));
  nb.insert(nb.begin() + static_cast<ptrdiff_t>(nf[0].offset), spliced.begin(), spliced.end());
  a2test::write_bytes(seg(tmp.path(), 1), nb.data(), nb.size());
  d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_TRUE(has(d.problems[0].message, "header version 2 inside a segment of version 3"))
      << d.problems[0].message;
}

// ------------------------------------------------ 7. every file in segments/

TEST(LoggerSegmentsFolder, EveryFileIsReadOrReported) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 500);
  const std::string big = tmp / "segments/99999999999.seg.zst";
  fs::copy_file(seg(tmp.path(), 0), big);
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_EQ(d.segments, 1u);
  EXPECT_EQ(d.n_records(), 1000u);
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_EQ(d.problems[0].path, big);
  EXPECT_EQ(d.problems[0].status, A2PACK_E_OUT_OF_RANGE);
  EXPECT_TRUE(has(d.problems[0].message, "not read")) << d.problems[0].message;
  expect_strict_fails(tmp.path(), big, 0);
  // Alone in the folder it is still reported (0 segments is not "clean").
  fs::rename(seg(tmp.path(), 0), tmp / "elsewhere.seg.zst");
  d = decode_dir(tmp.path(), {});
  EXPECT_EQ(d.segments, 0u);
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_EQ(d.problems[0].path, big);
  fs::remove(big);
  // A name with extra leading zeros is not ours either; a stray file is a note.
  fs::rename(tmp / "elsewhere.seg.zst", tmp / "segments/000000.seg.zst");
  a2test::write_bytes(tmp / "segments/README", "x", 1);
  d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 2u) << all_messages(d);
  EXPECT_EQ(d.problems[0].path, tmp / "segments/000000.seg.zst");
  EXPECT_EQ(d.problems[0].status, A2PACK_E_CORRUPT);
  EXPECT_FALSE(d.problems[0].note);
  EXPECT_EQ(d.problems[1].path, tmp / "segments/README");
  EXPECT_TRUE(d.problems[1].note);
  DecodeOptions strict;
  strict.strict = true;
  EXPECT_THROW(decode_dir(tmp.path(), strict), Error);
}
