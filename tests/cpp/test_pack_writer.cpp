// Building packs from folders: order, bad inputs, atomicity, misuse.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "pack/reader.hpp"
#include "pack/writer.hpp"
#include "test_pack_util.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::pack;
namespace fs = std::filesystem;

namespace {

void write_run(const std::string& path, uint64_t seed, size_t steps = 30) {
  fs::create_directories(fs::path(path).parent_path());
  std::string b = a2test::synthetic_bytes(seed, steps);
  a2test::write_bytes(path, b.data(), b.size());
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(PackDir, WalksRecursivelyInComponentOrder) {
  a2test::TempDir dir;
  write_run(dir / "in/b.a2run2", 1);
  write_run(dir / "in/a-b.a2run2", 2);
  write_run(dir / "in/a/z.a2run2", 3);
  write_run(dir / "in/a/y/x.a2run2", 4);
  a2test::write_bytes(dir / "in/notes.txt", "x", 1);
  auto files = list_run_files(dir / "in");
  std::vector<std::string> rel;
  for (auto& f : files) rel.push_back(fs::relative(f, dir / "in").string());
  // Component order puts folder "a" before "a-b.a2run2" ('/' sorts after '-'
  // in plain string order, but Path ordering compares components).
  EXPECT_EQ(rel, (std::vector<std::string>{"a/y/x.a2run2", "a/z.a2run2", "a-b.a2run2", "b.a2run2"}));
  BuildSummary s = pack_dir(dir / "in", dir / "out.a2pack", {}, 2, false, {}, {});
  EXPECT_EQ(s.entries, 4u);
  EXPECT_EQ(s.skipped, 0u);
  Reader r(dir / "out.a2pack");
  for (size_t i = 0; i < files.size(); ++i) {
    EntryBytes b = r.payload(i, true);
    EXPECT_EQ(std::vector<uint8_t>(b.data, b.data + b.size), a2test::read_bytes(files[i]));
  }
  EXPECT_EQ(s.file_bytes, r.file_size());
}

TEST(PackDir, BadInputsStopTheBuildOrAreSkipped) {
  a2test::TempDir dir;
  for (int i = 0; i < 5; ++i) write_run(dir / ("in/r" + std::to_string(i) + ".a2run2"), i);
  std::string broken = a2test::synthetic_bytes(4, 30);
  broken += '\0';  // v2 payload with a trailing byte
  a2test::write_bytes(dir / "in/r2.a2run2", broken.data(), broken.size());
  a2test::write_bytes(dir / "in/r3.a2run2", "", 0);

  try {
    pack_dir(dir / "in", dir / "out.a2pack", {}, 2, false, {}, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("r2.a2run2"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "out.a2pack"));
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"in"}));  // no temporary left

  std::vector<std::string> reported;
  BuildSummary s = pack_dir(dir / "in", dir / "out.a2pack", {}, 3, true,
                            [&](const std::string& p, const Error& e) {
                              reported.push_back(fs::path(p).filename().string());
                              EXPECT_NE(e.status(), A2PACK_OK);
                            },
                            {});
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.skipped, 2u);
  EXPECT_EQ(reported, (std::vector<std::string>{"r2.a2run2", "r3.a2run2"}));
  Reader r(dir / "out.a2pack");
  EXPECT_EQ(r.size(), 3u);
  r.validate(true, 2, {});
}

TEST(PackDir, EmptyOrMissingFolders) {
  a2test::TempDir dir;
  fs::create_directories(dir / "empty");
  try {
    pack_dir(dir / "empty", dir / "o.a2pack", {}, 1, false, {}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_NOT_FOUND);
  }
  try {
    pack_dir(dir / "nope", dir / "o.a2pack", {}, 1, false, {}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_NOT_FOUND);
  }
}

TEST(PackDir, ProgressCanInterrupt) {
  a2test::TempDir dir;
  for (int i = 0; i < 100; ++i) write_run(dir / ("in/r" + std::to_string(1000 + i) + ".a2run2"), i, 5);
  uint64_t calls = 0;
  try {
    pack_dir(dir / "in", dir / "o.a2pack", {}, 1, false, {}, [&](uint64_t done, uint64_t total) {
      ++calls;
      EXPECT_EQ(total, 100u);
      return done < 64;
    });
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_INTERRUPTED);
  }
  EXPECT_GE(calls, 1u);
  EXPECT_FALSE(fs::exists(dir / "o.a2pack"));
}

TEST(PackWriter, MisuseIsReported) {
  a2test::TempDir dir;
  std::string run = a2test::synthetic_bytes(0, 10);
  const auto* d = reinterpret_cast<const uint8_t*>(run.data());
  WriterOptions o;
  o.align = 3;
  EXPECT_THROW(Writer(dir / "a.a2pack", o), Error);
  o.align = 4096;
  o.expected_count = 1;
  {
    Writer w(dir / "a.a2pack", o);
    w.add(d, run.size());
    try {
      w.add(d, run.size());
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
    }
    // Bad bytes are refused and the writer carries on.
    std::string junk = "not a run at all";
    EXPECT_THROW(w.add(reinterpret_cast<const uint8_t*>(junk.data()), junk.size()), Error);
    EXPECT_EQ(w.count(), 1u);
    w.finish();
    EXPECT_THROW(w.finish(), Error);
    EXPECT_THROW(w.add(d, run.size()), Error);
  }
  EXPECT_EQ(Reader(dir / "a.a2pack").size(), 1u);
  {
    Writer w(dir / "abandoned.a2pack", {});
    w.add(d, run.size());
  }
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"a.a2pack"}));
}

TEST(PackWriter, SkippedEntriesLeaveZeroPaddingThatReadsBack) {
  // With a known count, skipped inputs leave their index slots as padding.
  a2test::TempDir dir;
  WriterOptions o;
  o.expected_count = 10;
  Writer w(dir / "p.a2pack", o);
  std::vector<std::string> runs;
  for (int i = 0; i < 3; ++i) {
    runs.push_back(a2test::synthetic_bytes(i, 12));
    w.add(reinterpret_cast<const uint8_t*>(runs.back().data()), runs.back().size());
  }
  w.finish();
  Reader r(dir / "p.a2pack");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r.entry(0).offset, 4096u);
  r.validate(true, 1, {});
}

TEST(PackWriter, CompressionIsTransparentAndSkippedWhenUseless) {
  a2test::TempDir dir;
  WriterOptions o;
  o.compression = Compression::zstd;
  Writer w(dir / "z.a2pack", o);
  std::string big = a2test::encode_like_fixture_v1(500);
  std::string tiny = a2test::synthetic_bytes(1, 0);
  w.add(reinterpret_cast<const uint8_t*>(big.data()), big.size());
  w.add(reinterpret_cast<const uint8_t*>(tiny.data()), tiny.size());
  BuildSummary s = w.finish();
  EXPECT_EQ(s.entries, 2u);
  Reader r(dir / "z.a2pack");
  EXPECT_EQ(r.entry(0).flags, kEntryZstd);
  EXPECT_EQ(r.entry(0).reserved, big.size());
  EXPECT_LT(r.entry(0).length, big.size());
  EXPECT_EQ(s.compressed_entries, r.entry(1).flags == kEntryZstd ? 2u : 1u);
  EXPECT_EQ(s.input_bytes, big.size() + tiny.size());
  EntryBytes b = r.payload(0, true);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data), b.size), big);
}

// A pack with a compressed entry says so in its header version (2), which
// upstream's reader refuses at open; a pack of stored entries stays version 1
// (upstream's bytes). Both read here, and so does a zstd entry under version 1
// (what earlier a2pack wrote).
TEST(PackWriter, CompressedPacksAreVersion2StoredPacksVersion1) {
  a2test::TempDir dir;
  std::string big = a2test::encode_like_fixture_v1(500);
  for (bool zstd : {false, true}) {
    WriterOptions o;
    o.compression = zstd ? Compression::zstd : Compression::none;
    std::string path = dir / (zstd ? "z.a2pack" : "s.a2pack");
    Writer w(path, o);
    w.add(reinterpret_cast<const uint8_t*>(big.data()), big.size());
    w.finish();
    Reader r(path);
    EXPECT_EQ(r.header().version, zstd ? kVersionCompressed : kVersion);
    EXPECT_EQ(r.entry(0).flags, zstd ? kEntryZstd : kEntryStored);
    r.validate(true, 1, {});
    if (zstd) {
      // Rewrite the header as version 1 (CRC recomputed): still read.
      std::vector<uint8_t> bytes = a2pack::read_file(path);
      bytes[8] = 1;
      uint32_t c = crc32c::compute(bytes.data(), 24);
      std::memcpy(bytes.data() + 24, &c, 4);
      a2test::write_bytes(dir / "z1.a2pack", bytes.data(), bytes.size());
      Reader r1(dir / "z1.a2pack");
      EntryBytes b = r1.payload(0, true);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data), b.size), big);
    }
  }
}
