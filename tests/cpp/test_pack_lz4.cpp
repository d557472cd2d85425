// lz4 packfile entries (flags 2): standard LZ4 frames, packs mixing stored,
// zstd and lz4 entries, levels, and damaged frames refused naming the entry.
#include <gtest/gtest.h>
#include <lz4.h>
#include <lz4frame.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "pack/lz4_entry.hpp"
#include "pack/reader.hpp"
#include "pack/writer.hpp"
#include "run/batch.hpp"
#include "test_pack_util.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::pack;
using a2test::expect_error;

namespace {

const uint8_t* u8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }
std::string str(const EntryBytes& b) { return std::string(reinterpret_cast<const char*>(b.data), b.size); }

// A v2 run with branches whose boards and values repeat: every codec shrinks it.
std::string compressible_v2(size_t n, uint64_t seed) {
  run::Run r;
  r.meta.steps = static_cast<uint32_t>(n);
  r.meta.start_unix_s = 1755000000 + seed;
  r.meta.highest_tile = 1024;
  r.meta.engine = seed % 2 ? "expectimax-d2" : "greedy";
  r.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r.boards[i] = 0x0123456789abcdefull + (i % 64) * 0x10 + seed;
    r.moves[i] = static_cast<uint8_t>(i % 4);
    r.present[i] = 1;
    r.legal[i] = 0xF;
    for (int k = 0; k < 4; ++k) r.values[4 * i + k] = 0.25f * static_cast<float>((i + k) % 4);
  }
  r.final_board = n + seed;
  return run::encode_v2(r);
}

// v2 and v1 runs of various lengths, all compressible.
std::vector<std::string> compressible_runs(size_t count) {
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i)
    out.push_back(i % 3 == 2 ? a2test::encode_like_fixture_v1(150 + 13 * i)
                             : compressible_v2(120 + 17 * i, i));
  return out;
}

// One LZ4 frame of `data` made with liblz4 directly (not the library's
// writer), with or without its content size in the header.
std::string lz4_frame(const std::string& data, bool content_size) {
  LZ4F_preferences_t prefs = LZ4F_INIT_PREFERENCES;
  prefs.frameInfo.contentSize = content_size ? data.size() : 0;
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  std::string out(LZ4F_compressFrameBound(data.size(), &prefs), '\0');
  size_t n = LZ4F_compressFrame(out.data(), out.size(), data.data(), data.size(), &prefs);
  EXPECT_FALSE(LZ4F_isError(n)) << LZ4F_getErrorName(n);
  out.resize(n);
  return out;
}

// Decompress a whole LZ4 frame with liblz4 directly.
std::string lz4_plain_decompress(const uint8_t* data, size_t len, size_t expect) {
  LZ4F_dctx* d = nullptr;
  EXPECT_FALSE(LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
  std::string out(expect, '\0');
  size_t dst = out.size(), src = len;
  size_t r = LZ4F_decompress(d, out.data(), &dst, data, &src, nullptr);
  LZ4F_freeDecompressionContext(d);
  EXPECT_EQ(r, 0u) << (LZ4F_isError(r) ? LZ4F_getErrorName(r) : "frame not finished");
  EXPECT_EQ(src, len);
  out.resize(dst);
  return out;
}

// An entry of the run `run` whose stored bytes are `frame` and whose index
// says `reserved` decompressed bytes, appended as the writer would.
Prepared frame_entry(const std::string& run, std::string frame, uint32_t reserved) {
  Prepared p = prepare(u8(run), run.size(), WriterOptions{});
  p.compressed = std::move(frame);
  p.flags = kEntryLz4;
  p.raw_len = reserved;
  p.crc = 0;
  return p;
}


bool has(const Error& e, const std::string& what) {
  return std::string(e.what()).find(what) != std::string::npos;
}

}  // namespace

// What --compress lz4 writes: flags 2, `reserved` the run's length, the
// stored bytes one standard LZ4 frame (content size and content checksum in
// it) that liblz4 alone decompresses to the run; the header says version 2.
TEST(PackLz4, EntriesAreStandardLz4FramesOfTheRun) {
  a2test::TempDir dir;
  auto runs = compressible_runs(9);
  WriterOptions o;
  o.compression = Compression::lz4;
  Writer w(dir / "l.a2pack", o);
  for (auto& p : runs) w.add(u8(p), p.size());
  BuildSummary s = w.finish();
  EXPECT_EQ(s.compressed_entries, runs.size());
  Reader r(dir / "l.a2pack");
  EXPECT_EQ(r.header().version, kVersionCompressed);
  uint64_t stored = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Entry& e = r.entry(i);
    ASSERT_EQ(e.flags, kEntryLz4) << i;
    EXPECT_EQ(e.reserved, runs[i].size());
    EXPECT_LT(e.length, runs[i].size());
    stored += e.length;
    const uint8_t* f = r.stored_view(i, true);
    EXPECT_EQ(std::memcmp(f, "\x04\x22\x4d\x18", 4), 0);  // the LZ4 frame magic
    LZ4F_dctx* d = nullptr;
    ASSERT_FALSE(LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
    LZ4F_frameInfo_t info;
    size_t consumed = e.length;
    ASSERT_FALSE(LZ4F_isError(LZ4F_getFrameInfo(d, &info, f, &consumed)));
    LZ4F_freeDecompressionContext(d);
    EXPECT_EQ(info.contentSize, runs[i].size());
    EXPECT_EQ(info.contentChecksumFlag, LZ4F_contentChecksumEnabled);
    EXPECT_EQ(lz4_plain_decompress(f, e.length, runs[i].size()), runs[i]);
    EXPECT_EQ(str(r.payload(i, true)), runs[i]);
  }
  EXPECT_EQ(s.stored_bytes, stored);
  r.validate(true, 2, {});
}

// Frames made by liblz4 itself (with or without a content size) read as
// entries: the reader takes any valid LZ4 frame, not only its own writer's.
TEST(PackLz4, FramesFromLiblz4ItselfRead) {
  a2test::TempDir dir;
  auto runs = compressible_runs(4);
  {
    Writer w(dir / "f.a2pack", WriterOptions{});
    for (size_t i = 0; i < runs.size(); ++i)
      w.append(frame_entry(runs[i], lz4_frame(runs[i], i % 2 == 0), static_cast<uint32_t>(runs[i].size())));
    w.finish();
  }
  for (bool mmap : {true, false}) {
    ReaderOptions ro;
    ro.use_mmap = mmap;
    Reader r(dir / "f.a2pack", ro);
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_EQ(str(r.payload(i, true)), runs[i]);
      EXPECT_EQ(r.decode(i, true), run::decode(u8(runs[i]), runs[i].size()));
    }
    r.validate(true, 1, {});
  }
}

// One pack holding stored, zstd and lz4 entries (each prepared with its own
// options and appended): every read path - single entries, parallel decode,
// batch decode, statistics, histograms, full validation - in both open modes
// gives back the original runs.
TEST(PackLz4, MixedStoredZstdAndLz4EntriesReadInOnePack) {
  a2test::TempDir dir;
  auto runs = compressible_runs(15);
  const Compression modes[3] = {Compression::none, Compression::zstd, Compression::lz4};
  const uint16_t flags[3] = {kEntryStored, kEntryZstd, kEntryLz4};
  for (bool staged : {false, true}) {
    std::string path = dir / (staged ? "staged.a2pack" : "direct.a2pack");
    {
      WriterOptions wo;
      wo.align = 256;
      wo.expected_count = staged ? 0 : runs.size();
      Writer w(path, wo);
      for (size_t i = 0; i < runs.size(); ++i) {
        WriterOptions o;
        o.compression = modes[i % 3];
        o.lz4_level = i % 2 ? 9 : 0;
        w.append(prepare(u8(runs[i]), runs[i].size(), o));
      }
      BuildSummary s = w.finish();
      EXPECT_EQ(s.compressed_entries, 10u);
    }
    for (bool mmap : {true, false}) {
      ReaderOptions ro;
      ro.use_mmap = mmap;
      Reader r(path, ro);
      ASSERT_EQ(r.size(), runs.size());
      EXPECT_EQ(r.header().version, kVersionCompressed);
      std::vector<uint64_t> idx;
      std::vector<run::Payload> originals;
      for (size_t i = 0; i < runs.size(); ++i) {
        EXPECT_EQ(r.entry(i).flags, flags[i % 3]) << i;
        EXPECT_EQ(str(r.payload(i, true)), runs[i]) << i;
        idx.push_back(i);
        originals.push_back({u8(runs[i]), runs[i].size()});
      }
      std::vector<uint64_t> pick = {14, 0, 1, 2, 5, 5, 7, 12};
      std::vector<run::Payload> sub;
      for (uint64_t i : pick) sub.push_back(originals[i]);
      run::Batch expect = run::decode_batch(sub.data(), sub.size(), 1);
      for (uint32_t workers : {1u, 3u}) {
        run::Batch got = r.decode_batch(pick.data(), pick.size(), workers, true);
        EXPECT_EQ(got.boards, expect.boards);
        EXPECT_EQ(got.values, expect.values);
        EXPECT_EQ(got.step_offsets, expect.step_offsets);
        EXPECT_EQ(got.engine_bytes, expect.engine_bytes);
        auto many = r.decode_many(pick.data(), pick.size(), workers, true);
        for (size_t k = 0; k < pick.size(); ++k)
          EXPECT_EQ(many[k], run::decode(sub[k].data, sub[k].len));
      }
      std::vector<uint32_t> lengths;
      for (auto& p : originals) lengths.push_back(run::decode(p.data, p.len).meta.steps);
      Reader::Stats st = r.stats(2);
      EXPECT_TRUE(st.from_block);
      EXPECT_EQ(st.stats, summarize_lengths(lengths));
      const Histograms& h = r.histograms(2);
      uint64_t counted = 0;
      for (auto& t : h.tiles) counted += t.count;
      EXPECT_EQ(counted, runs.size());
      r.validate(true, 2, {});
      r.validate(false, 1, {});
    }
  }
}

// Levels: LZ4 HC (3..12) packs smaller than the fast default, a negative
// level (acceleration) larger; all read back. Levels outside -65536..12 and
// unknown compression values are refused when the writer is opened.
TEST(PackLz4, LevelsAndTheirLimits) {
  a2test::TempDir dir;
  auto runs = compressible_runs(6);
  auto stored_with = [&](int level) {
    WriterOptions o;
    o.compression = Compression::lz4;
    o.lz4_level = level;
    std::string path = dir / ("l" + std::to_string(level + 100) + ".a2pack");
    Writer w(path, o);
    for (auto& p : runs) w.add(u8(p), p.size());
    BuildSummary s = w.finish();
    Reader r(path);
    for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(str(r.payload(i, true)), runs[i]);
    return s.stored_bytes;
  };
  uint64_t accel = stored_with(-20), fast = stored_with(0), hc = stored_with(9),
           max = stored_with(kLz4MaxLevel);
  EXPECT_LT(hc, fast);
  EXPECT_LE(max, hc);
  EXPECT_GT(accel, fast);
  for (int bad : {kLz4MaxLevel + 1, kLz4MinLevel - 1}) {
    WriterOptions o;
    o.compression = Compression::lz4;
    o.lz4_level = bad;
    std::string msg;
    EXPECT_EQ(a2test::status_of([&] { Writer w(dir / "bad.a2pack", o); }, &msg), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_NE(msg.find("lz4 level"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
  }
  WriterOptions o;
  o.compression = static_cast<Compression>(3);
  std::string msg;
  EXPECT_EQ(a2test::status_of([&] { Writer w(dir / "bad.a2pack", o); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("2 = lz4"), std::string::npos) << msg;
}

// Damaged frames, each in its own entry of a pack without entry CRCs (so the
// frame's own checks are what catches them): each fails with CORRUPT naming
// the pack, the entry and what is wrong, while every other entry still reads.
TEST(PackLz4, DamagedFramesFailTheirEntryNamingIt) {
  a2test::TempDir dir;
  const std::string run = compressible_v2(400, 3);
  const uint32_t n = static_cast<uint32_t>(run.size());
  const std::string good = lz4_frame(run, true);
  const std::string unsized = lz4_frame(run, false);
  auto flipped = [](std::string f, size_t at) {
    f[at] = static_cast<char>(f[at] ^ 0x5a);
    return f;
  };
  struct Case {
    std::string frame;
    uint32_t reserved;
    const char* says;  // nullptr: reads
  };
  const std::vector<Case> cases = {
      {good, n, nullptr},
      {flipped(good, 0), n, "does not start with a valid LZ4 frame header"},
      {flipped(good, 14), n, "does not start with a valid LZ4 frame header"},  // header checksum
      {flipped(good, good.size() - 1), n, "LZ4 frame is damaged"},             // content checksum
      {flipped(good, good.size() / 2), n, "LZ4 frame"},                        // inside a block
      {good.substr(0, good.size() - 6), n, "LZ4 frame ends early"},
      {good, n + 1, "declares"},
      {unsized, n - 7, "decompresses to more than"},
      {unsized, n + 7, "decompressed to"},
      {good, kMaxDecompressed + 1, "more than the 1073741824 allowed"},
      {good + "xyz", n, "3 stored bytes follow the LZ4 frame"},
      {unsized, n, nullptr},
  };
  {
    WriterOptions o;
    o.entry_crc = false;
    Writer w(dir / "d.a2pack", o);
    for (const Case& c : cases) w.append(frame_entry(run, c.frame, c.reserved));
    w.finish();
  }
  for (bool mmap : {true, false}) {
    ReaderOptions ro;
    ro.use_mmap = mmap;
    Reader r(dir / "d.a2pack", ro);  // nothing of a payload is read at open
    for (size_t i = 0; i < cases.size(); ++i) {
      if (!cases[i].says) {
        EXPECT_EQ(str(r.payload(i, true)), run) << i;
        continue;
      }
      Error e = expect_error([&] { r.decode(i, true); });
      EXPECT_EQ(e.status(), A2PACK_E_CORRUPT) << i << ": " << e.what();
      EXPECT_TRUE(has(e, "d.a2pack: entry " + std::to_string(i) + ":")) << e.what();
      EXPECT_TRUE(has(e, cases[i].says)) << i << ": " << e.what();
      // The same through the other read paths.
      uint64_t one = i;
      EXPECT_TRUE(has(expect_error([&] { r.decode_batch(&one, 1, 1, true); }), "entry " + std::to_string(i)));
      EXPECT_TRUE(has(expect_error([&] { r.payload(i, false); }), cases[i].says));
    }
    Error v = expect_error([&] { r.validate(true, 2, {}); });
    EXPECT_EQ(v.status(), A2PACK_E_CORRUPT);
    EXPECT_TRUE(has(v, "10 problems found")) << v.what();
    for (size_t i = 1; i < cases.size() - 1; ++i)
      EXPECT_TRUE(has(v, "entry " + std::to_string(i) + ":")) << i << ": " << v.what();
    EXPECT_FALSE(has(v, "entry 0:")) << v.what();
    EXPECT_FALSE(has(v, "entry 11:")) << v.what();
  }
}

// Entries whose index claims the most a run may decompress to (1 GiB) for a
// small frame: refused from the frame header, in batches that lay the runs
// out in one buffer (up to 4 GiB of claims) and in those past that, which
// go entry by entry; zstd entries alike.
TEST(PackLz4, ClaimsOfAGibibytePerEntryAreRefusedFromTheFrameHeader) {
  a2test::TempDir dir;
  const std::string run = compressible_v2(300, 1);
  const std::string zframe = [&] {
    WriterOptions o;
    o.compression = Compression::zstd;
    return prepare(u8(run), run.size(), o).compressed;
  }();
  {
    WriterOptions o;
    o.entry_crc = false;
    Writer w(dir / "h.a2pack", o);
    w.append(frame_entry(run, lz4_frame(run, true), static_cast<uint32_t>(run.size())));
    for (int k = 0; k < 6; ++k) {
      Prepared p = frame_entry(run, k % 2 ? zframe : lz4_frame(run, true), kMaxDecompressed);
      if (k % 2) p.flags = kEntryZstd;
      w.append(p);
    }
    w.finish();
  }
  for (bool mmap : {true, false}) {
    ReaderOptions ro;
    ro.use_mmap = mmap;
    Reader r(dir / "h.a2pack", ro);
    for (std::vector<uint64_t> idx : {std::vector<uint64_t>{0, 1}, std::vector<uint64_t>{0, 2},
                                      std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6}}) {
      Error e = expect_error([&] { r.decode_batch(idx.data(), idx.size(), 2, true); });
      EXPECT_EQ(e.status(), A2PACK_E_CORRUPT) << e.what();
      EXPECT_TRUE(has(e, "declares")) << e.what();
      EXPECT_TRUE(has(e, "but the index says 1073741824")) << e.what();
    }
    for (uint64_t i = 1; i < 7; ++i) EXPECT_TRUE(has(expect_error([&] { r.payload(i, true); }), "declares"));
    EXPECT_EQ(str(r.payload(0, true)), run);
  }
}

// With entry CRCs the CRC catches a damaged frame first (CHECKSUM); reading
// without the CRC check, the frame's own content checksum still refuses it.
TEST(PackLz4, EntryCrcAndTheFrameChecksumBothGuard) {
  a2test::TempDir dir;
  auto runs = compressible_runs(3);
  WriterOptions o;
  o.compression = Compression::lz4;
  Writer w(dir / "c.a2pack", o);
  for (auto& p : runs) w.add(u8(p), p.size());
  w.finish();
  std::vector<uint8_t> bytes = a2pack::read_file(dir / "c.a2pack");
  Entry e;
  {
    Reader r(dir / "c.a2pack");
    e = r.entry(1);
  }
  bytes[e.offset + e.length - 2] ^= 0x01;  // in the content checksum
  a2test::write_bytes(dir / "c2.a2pack", bytes.data(), bytes.size());
  Reader r(dir / "c2.a2pack");
  Error with_crc = expect_error([&] { r.decode(1, true); });
  EXPECT_EQ(with_crc.status(), A2PACK_E_CHECKSUM) << with_crc.what();
  EXPECT_TRUE(has(with_crc, "entry 1")) << with_crc.what();
  Error without = expect_error([&] { r.decode(1, false); });
  EXPECT_EQ(without.status(), A2PACK_E_CORRUPT) << without.what();
  EXPECT_TRUE(has(without, "entry 1") && has(without, "LZ4 frame is damaged")) << without.what();
  EXPECT_EQ(str(r.payload(0, true)), runs[0]);
  EXPECT_EQ(str(r.payload(2, true)), runs[2]);
}

// Entry flags this build does not know (3 and up) fail that entry with
// UNSUPPORTED, naming the value and the ones it reads.
TEST(PackLz4, UnknownEntryFlagsAreRefusedNamingTheKnownOnes) {
  a2test::TempDir dir;
  auto runs = compressible_runs(3);
  {
    Writer w(dir / "u.a2pack", WriterOptions{});
    for (size_t i = 0; i < runs.size(); ++i) {
      Prepared p = prepare(u8(runs[i]), runs[i].size(), WriterOptions{});
      if (i == 1) p.flags = 3;  // stored bytes, a flags value nobody writes
      w.append(p);
    }
    w.finish();
  }
  Reader r(dir / "u.a2pack");
  Error e = expect_error([&] { r.decode(1, true); });
  EXPECT_EQ(e.status(), A2PACK_E_UNSUPPORTED);
  EXPECT_TRUE(has(e, "entry 1: unknown entry flags 0x3 (0 = stored, 1 = zstd, 2 = lz4)")) << e.what();
  EXPECT_EQ(str(r.payload(0, true)), runs[0]);
  EXPECT_EQ(str(r.payload(2, true)), runs[2]);
}

// The library's own decoder on its own, for the pieces the pack tests reach
// only through a file.
TEST(PackLz4, CodecRoundTripAndEmptyInput) {
  for (size_t len : {size_t{0}, size_t{1}, size_t{100}, size_t{70000}, size_t{300000}}) {
    std::string data(len, '\0');
    for (size_t i = 0; i < len; ++i) data[i] = static_cast<char>((i * 7) % 13 + (i / 1000));
    for (int level : {-5, 0, 3, 12}) {
      std::string f = lz4_compress(u8(data), data.size(), level);
      std::vector<uint8_t> out;
      lz4_decompress(u8(f), f.size(), static_cast<uint32_t>(len), out);
      EXPECT_EQ(std::string(out.begin(), out.end()), data) << len << " " << level;
    }
  }
  // The linked liblz4 is the one its headers describe.
  EXPECT_EQ(LZ4_versionNumber(), LZ4_VERSION_NUMBER);
#ifdef A2PACK_LZ4_BUNDLED
  EXPECT_EQ(std::string(LZ4_versionString()), "1.10.0");
#endif
}
