// Packfile round trips, upstream byte compatibility and corruption handling.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <fmt/format.h>

#include <filesystem>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "pack/reader.hpp"
#include "pack/writer.hpp"
#include "run/batch.hpp"
#include "test_pack_util.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::pack;
using a2test::expect_error;

namespace {

std::vector<std::string> mixed_payloads(size_t n, size_t steps = 40) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(a2test::synthetic_bytes(i, steps + i % 7));
  return out;
}

std::string write_pack(const std::string& path, const std::vector<std::string>& payloads,
                       WriterOptions opts = {}) {
  Writer w(path, opts);
  for (auto& p : payloads) w.add(reinterpret_cast<const uint8_t*>(p.data()), p.size());
  w.finish();
  auto bytes = a2test::read_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

std::string stats_block_of(const std::vector<std::string>& payloads) {
  std::vector<uint32_t> lengths;
  for (auto& p : payloads)
    lengths.push_back(run::decode(reinterpret_cast<const uint8_t*>(p.data()), p.size()).meta.steps);
  return encode_stats_block(summarize_lengths(lengths));
}

a2pack_status open_status(const std::string& path, ReaderOptions o = {}) {
  try {
    Reader r(path, o);
    return A2PACK_OK;
  } catch (const Error& e) {
    return e.status();
  }
}


}  // namespace

TEST(PackWriter, BytesMatchUpstreamLayout) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(5);
  for (bool staged : {false, true}) {
    WriterOptions o;
    o.expected_count = staged ? 0 : payloads.size();
    std::string ours = write_pack(dir / "p.a2pack", payloads, o);
    std::string upstream = a2test::upstream_pack(payloads, 4096, true, stats_block_of(payloads));
    EXPECT_EQ(ours, upstream) << (staged ? "staged" : "direct");
  }
  WriterOptions o;
  o.align = 64;
  o.entry_crc = false;
  EXPECT_EQ(write_pack(dir / "q.a2pack", payloads, o),
            a2test::upstream_pack(payloads, 64, false, stats_block_of(payloads)));
}

TEST(PackWriter, EmptyPack) {
  a2test::TempDir dir;
  std::string bytes = write_pack(dir / "e.a2pack", {});
  EXPECT_EQ(bytes, a2test::upstream_pack({}, 4096, true, stats_block_of({})));
  Reader r(dir / "e.a2pack");
  EXPECT_EQ(r.size(), 0u);
  EXPECT_EQ(r.stats(1).stats.count, 0u);
  r.validate(true, 1, {});
}

TEST(PackReader, UpstreamPackWithoutStatsOpens) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(9);
  std::string bytes = a2test::upstream_pack(payloads, 4096, true, "");
  a2test::write_bytes(dir / "u.a2pack", bytes.data(), bytes.size());
  Reader r(dir / "u.a2pack");
  ASSERT_EQ(r.size(), 9u);
  EXPECT_FALSE(r.stats_block());
  Reader::Stats s = r.stats(2);
  EXPECT_FALSE(s.from_block);
  std::vector<uint32_t> lengths;
  for (auto& p : payloads)
    lengths.push_back(run::decode(reinterpret_cast<const uint8_t*>(p.data()), p.size()).meta.steps);
  EXPECT_EQ(s.stats, summarize_lengths(lengths));
  for (size_t i = 0; i < payloads.size(); ++i) {
    EntryBytes b = r.payload(i, true);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data), b.size), payloads[i]);
  }
  r.validate(true, 2, {});
}

class PackRoundTrip : public ::testing::TestWithParam<std::tuple<Compression, bool, bool>> {};

TEST_P(PackRoundTrip, MixedRunsDecodeAsTheOriginals) {
  auto [compression, mmap, staged] = GetParam();
  const bool compress = compression != Compression::none;
  const uint16_t flag = compression == Compression::zstd ? kEntryZstd : kEntryLz4;
  a2test::TempDir dir;
  auto payloads = mixed_payloads(23, 200);
  WriterOptions o;
  o.compression = compression;
  o.expected_count = staged ? 0 : payloads.size();
  o.align = 512;
  write_pack(dir / "p.a2pack", payloads, o);
  ReaderOptions ro;
  ro.use_mmap = mmap;
  Reader r(dir / "p.a2pack", ro);
  ASSERT_EQ(r.size(), payloads.size());
  EXPECT_TRUE(r.stats_block());
  std::vector<run::Payload> originals;
  std::vector<uint64_t> idx;
  size_t compressed = 0;
  for (size_t i = 0; i < payloads.size(); ++i) {
    const auto* d = reinterpret_cast<const uint8_t*>(payloads[i].data());
    originals.push_back({d, payloads[i].size()});
    idx.push_back(i);
    const Entry& e = r.entry(i);
    EXPECT_EQ(e.offset % 512, 0u);
    EXPECT_TRUE(e.flags == kEntryStored || (compress && e.flags == flag)) << e.flags;
    compressed += e.flags != kEntryStored;
    EXPECT_EQ(r.kind(i), run::detect_kind(d, payloads[i].size()));
    EntryBytes b = r.payload(i, true);
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(b.data), b.size), payloads[i]);
    EXPECT_EQ(r.decode(i, true), run::decode(d, payloads[i].size()));
  }
  EXPECT_EQ(compressed > 0, compress);
  // Batch decode of a shuffled subset equals the run layer's batch decode.
  std::vector<uint64_t> pick = {22, 0, 5, 5, 13, 1};
  std::vector<run::Payload> sub;
  for (uint64_t i : pick) sub.push_back(originals[i]);
  run::Batch expect = run::decode_batch(sub.data(), sub.size(), 1);
  for (uint32_t w : {1u, 2u, 3u}) {
    run::Batch got = r.decode_batch(pick.data(), pick.size(), w, true);
    EXPECT_EQ(got.boards, expect.boards);
    EXPECT_EQ(got.values, expect.values);
    EXPECT_EQ(got.step_offsets, expect.step_offsets);
    EXPECT_EQ(got.engine_bytes, expect.engine_bytes);
    EXPECT_EQ(got.final_boards, expect.final_boards);
    auto many = r.decode_many(pick.data(), pick.size(), w, false);
    for (size_t k = 0; k < pick.size(); ++k) EXPECT_EQ(many[k], r.decode(pick[k], true));
  }
  if (mmap && !compress) {
    const uint8_t* v = r.stored_view(3, true);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(v), r.entry(3).length), payloads[3]);
  }
  if (!mmap) EXPECT_EQ(expect_error([&] { r.stored_view(0, true); }).status(), A2PACK_E_UNSUPPORTED);
  r.validate(true, 2, {});
  r.validate(false, 1, {});
}

INSTANTIATE_TEST_SUITE_P(Modes, PackRoundTrip,
                         ::testing::Combine(::testing::Values(Compression::none, Compression::zstd,
                                                              Compression::lz4),
                                            ::testing::Bool(), ::testing::Bool()));

TEST(PackReader, OutOfRangeIndicesAreErrors) {
  a2test::TempDir dir;
  write_pack(dir / "p.a2pack", mixed_payloads(3));
  Reader r(dir / "p.a2pack");
  EXPECT_EQ(expect_error([&] { r.entry(3); }).status(), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(expect_error([&] { r.decode(UINT64_MAX, true); }).status(), A2PACK_E_OUT_OF_RANGE);
  uint64_t idx[] = {0, 1, 7};
  Error e = expect_error([&] { r.decode_batch(idx, 3, 2, true); });
  EXPECT_EQ(e.status(), A2PACK_E_OUT_OF_RANGE);
  EXPECT_NE(std::string(e.what()).find("entry 7"), std::string::npos) << e.what();
}

TEST(PackReader, StatsBlockAndHistograms) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(12);
  write_pack(dir / "p.a2pack", payloads);
  Reader r(dir / "p.a2pack");
  Reader::Stats s = r.stats(1);
  EXPECT_TRUE(s.from_block);
  EXPECT_EQ(s.stats, *r.stats_block());
  EXPECT_EQ(s.stats.count, 12u);
  const Histograms& h1 = r.histograms(1);
  HistogramBuilder expect;
  for (auto& p : payloads) {
    run::Run x = run::decode(reinterpret_cast<const uint8_t*>(p.data()), p.size());
    expect.add(x.meta.highest_tile, x.meta.engine);
  }
  EXPECT_EQ(h1, expect.finish());
  EXPECT_EQ(&r.histograms(3), &h1);  // cached
  // The same pack without a stats block computes the same numbers.
  std::string bytes = a2test::upstream_pack(payloads, 4096, true, "");
  a2test::write_bytes(dir / "u.a2pack", bytes.data(), bytes.size());
  Reader u(dir / "u.a2pack");
  EXPECT_EQ(u.stats(3).stats, s.stats);
  EXPECT_EQ(u.histograms(2), h1);
}

// ---------------------------------------------------------------- corruption
TEST(PackCorruption, EveryHeaderIndexAndFooterByteIsCaughtAtOpen) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(4, 20);
  std::string good = write_pack(dir / "good.a2pack", payloads);
  const size_t index_end = kHeaderSize + kEntrySize * payloads.size();
  std::vector<size_t> positions;
  for (size_t k = 0; k < index_end; ++k) positions.push_back(k);
  for (size_t k = good.size() - kFooterSize; k < good.size(); ++k) positions.push_back(k);
  const std::string path = dir / "bad.a2pack";
  for (size_t pos : positions) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      std::string bad = good;
      bad[pos] = static_cast<char>(bad[pos] ^ flip);
      a2test::write_bytes(path, bad.data(), bad.size());
      for (bool mmap : {true, false}) {
        ReaderOptions o;
        o.use_mmap = mmap;
        a2pack_status st = open_status(path, o);
        EXPECT_NE(st, A2PACK_OK) << "byte " << pos << " ^ " << int(flip);
        EXPECT_TRUE(st == A2PACK_E_CHECKSUM || st == A2PACK_E_CORRUPT) << pos << " " << st;
      }
    }
  }
}

TEST(PackCorruption, PaddingAfterTheIndexIsCheckedAtOpen) {
  a2test::TempDir dir;
  std::string good = write_pack(dir / "good.a2pack", mixed_payloads(2));
  std::string bad = good;
  bad[kHeaderSize + 2 * kEntrySize + 100] = 1;
  a2test::write_bytes(dir / "bad.a2pack", bad.data(), bad.size());
  Error e = expect_error([&] { Reader r(dir / "bad.a2pack"); });
  EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
  EXPECT_NE(std::string(e.what()).find("padding"), std::string::npos);
}

TEST(PackCorruption, EachRejectionSaysWhatFailed) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(3);
  std::string good = a2test::upstream_pack(payloads, 4096, true, "");
  const std::string path = dir / "x.a2pack";
  auto check = [&](const std::string& bytes, a2pack_status want, const std::string& words) {
    a2test::write_bytes(path, bytes.data(), bytes.size());
    Error e = expect_error([&] { Reader r(path); });
    EXPECT_EQ(e.status(), want) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  };
  auto rehead = [](std::string b) {  // recompute the header CRC
    uint32_t c = crc32c::compute(b.data(), 24);
    std::memcpy(b.data() + 24, &c, 4);
    return b;
  };
  auto reindex = [&](std::string b) {  // recompute index and footer CRCs
    size_t fo = b.size() - kFooterSize;
    uint32_t ic = crc32c::compute(b.data() + kHeaderSize, kEntrySize * payloads.size());
    std::memcpy(b.data() + fo + 8, &ic, 4);
    uint32_t fc = crc32c::compute(b.data() + fo, 24);
    std::memcpy(b.data() + fo + 24, &fc, 4);
    return b;
  };
  check(good.substr(0, 59), A2PACK_E_CORRUPT, "shorter");
  check("B" + good.substr(1), A2PACK_E_CORRUPT, "magic");
  std::string v = good;
  v[8] = 3;  // 1 and 2 (compressed entries) are read
  check(rehead(v), A2PACK_E_UNSUPPORTED, "version 3");
  check(v, A2PACK_E_CHECKSUM, "header CRC");
  std::string fl = good;
  fl[12] = 1;
  check(rehead(fl), A2PACK_E_UNSUPPORTED, "flags");
  std::string cnt = good;
  cnt[16] = 0x7F;
  cnt[22] = 0x01;
  check(rehead(cnt), A2PACK_E_CORRUPT, "count");
  std::string ix = good;
  ix[kHeaderSize + 9] ^= 1;
  check(ix, A2PACK_E_CHECKSUM, "index CRC");
  std::string ft = good;
  ft[good.size() - 30] ^= 1;
  check(ft, A2PACK_E_CHECKSUM, "footer CRC");
  std::string pad = good;
  pad[good.size() - 1] = 1;
  check(pad, A2PACK_E_CORRUPT, "footer padding");
  // An entry pointing into the index, and one running into the footer.
  std::string in_index = good;
  uint64_t off = 10;
  std::memcpy(in_index.data() + kHeaderSize, &off, 8);
  check(reindex(in_index), A2PACK_E_CORRUPT, "entry 0");
  std::string past = good;
  uint32_t len = 0x7FFFFFFF;
  std::memcpy(past.data() + kHeaderSize + kEntrySize + 8, &len, 4);
  check(reindex(past), A2PACK_E_CORRUPT, "entry 1");
  // data_end differing from the entries' maximum end.
  std::string de = good;
  size_t fo = de.size() - kFooterSize;
  de[fo] ^= 1;
  check(reindex(de), A2PACK_E_CORRUPT, "data_end");
}

TEST(PackCorruption, ACorruptPayloadFailsOnlyItsEntry) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(6, 50);
  for (bool crc : {true, false}) {
    WriterOptions o;
    o.entry_crc = crc;
    std::string good = write_pack(dir / "p.a2pack", payloads, o);
    Reader g(dir / "p.a2pack");
    std::string bad = good;
    const Entry e = g.entry(2);
    bad[e.offset + e.length / 2] ^= 0x55;
    bad[e.offset + e.length - 1] ^= 0x55;
    a2test::write_bytes(dir / "bad.a2pack", bad.data(), bad.size());
    Reader r(dir / "bad.a2pack");  // payloads are not read at open
    Error err = expect_error([&] { r.decode(2, true); });
    EXPECT_EQ(err.status(), crc ? A2PACK_E_CHECKSUM : A2PACK_E_CORRUPT) << err.what();
    EXPECT_NE(std::string(err.what()).find("entry 2"), std::string::npos) << err.what();
    for (uint64_t i : {0, 1, 3, 4, 5}) EXPECT_NO_THROW(r.decode(i, true));
    uint64_t idx[] = {0, 1, 2};
    Error be = expect_error([&] { r.decode_batch(idx, 3, 2, true); });
    EXPECT_NE(std::string(be.what()).find("entry 2"), std::string::npos) << be.what();
    Error ve = expect_error([&] { r.validate(true, 2, {}); });
    EXPECT_NE(std::string(ve.what()).find("entry 2"), std::string::npos) << ve.what();
  }
}

TEST(PackCorruption, KindMismatchAndUnknownFlagsFailTheirEntry) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(3);
  std::string good = a2test::upstream_pack(payloads, 4096, true, "");
  auto reindex = [&](std::string b) {
    size_t fo = b.size() - kFooterSize;
    uint32_t ic = crc32c::compute(b.data() + kHeaderSize, kEntrySize * payloads.size());
    std::memcpy(b.data() + fo + 8, &ic, 4);
    uint32_t fc = crc32c::compute(b.data() + fo, 24);
    std::memcpy(b.data() + fo + 24, &fc, 4);
    return b;
  };
  std::string b = good;
  b[kHeaderSize + 12] = 1;   // entry 0 is v2; the index now says v1
  b[kHeaderSize + 32 + 14] = 9;  // entry 1: unknown flags
  b[kHeaderSize + 64 + 12] = 7;  // entry 2: unknown kind
  b = reindex(b);
  a2test::write_bytes(dir / "k.a2pack", b.data(), b.size());
  Reader r(dir / "k.a2pack");
  EXPECT_EQ(expect_error([&] { r.decode(0, true); }).status(), A2PACK_E_CORRUPT);
  EXPECT_EQ(expect_error([&] { r.decode(1, true); }).status(), A2PACK_E_UNSUPPORTED);
  EXPECT_EQ(expect_error([&] { r.kind(2); }).status(), A2PACK_E_UNSUPPORTED);
}

TEST(PackCorruption, FullValidationCatchesPaddingAndStatsTampering) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(4);
  std::string good = write_pack(dir / "p.a2pack", payloads);
  Reader g(dir / "p.a2pack");
  // A byte in the gap between entries 1 and 2: open and quick validation
  // cannot see it (no CRC covers it), full validation can.
  std::string gap = good;
  gap[g.entry(1).end() + 3] = 1;
  a2test::write_bytes(dir / "gap.a2pack", gap.data(), gap.size());
  Reader r(dir / "gap.a2pack");
  r.validate(false, 1, {});
  Error e = expect_error([&] { r.validate(true, 1, {}); });
  EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
  EXPECT_NE(std::string(e.what()).find("between entries"), std::string::npos) << e.what();
  // A stats block that still parses but lies.
  std::string st = good;
  st[g.footer().stats_offset + 4 + 1] ^= 0x01;  // total_steps' low bits
  a2test::write_bytes(dir / "st.a2pack", st.data(), st.size());
  Reader s(dir / "st.a2pack");
  Error se = expect_error([&] { s.validate(true, 1, {}); });
  EXPECT_NE(std::string(se.what()).find("stats block"), std::string::npos) << se.what();
  // A stats block whose count disagrees with the header fails at open.
  std::string sc = good;
  sc[g.footer().stats_offset + 4] ^= 0x01;
  a2test::write_bytes(dir / "sc.a2pack", sc.data(), sc.size());
  EXPECT_EQ(open_status(dir / "sc.a2pack"), A2PACK_E_CORRUPT);
}

TEST(PackReader, PacksLargerThan4GiB) {
  // A sparse file: the entry lives past 5 GiB, the hole reads as zeros.
  a2test::TempDir dir;
  const std::string path = dir / "big.a2pack";
  std::string payload = a2test::synthetic_bytes(2, 30);
  const uint64_t offset = (5ull << 30) + 4096;
  std::string head;
  head.append("A2PACK\0\0", 8);
  a2test::put32(head, 1);
  a2test::put32(head, 0);
  a2test::put64(head, 1);
  a2test::put32(head, crc32c::compute(head.data(), 24));
  std::string index;
  a2test::put64(index, offset);
  a2test::put32(index, static_cast<uint32_t>(payload.size()));
  a2test::put16(index, 2);
  a2test::put16(index, 0);
  a2test::put32(index, crc32c::compute(payload.data(), payload.size()));
  a2test::put32(index, 0);
  a2test::put64(index, 0);
  std::string footer;
  a2test::put64(footer, offset + payload.size());
  a2test::put32(footer, crc32c::compute(index.data(), index.size()));
  a2test::put32(footer, 0);
  a2test::put64(footer, 0);
  a2test::put32(footer, crc32c::compute(footer.data(), 24));
  a2test::put32(footer, 0);
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, head.data(), head.size(), 0), ssize_t(head.size()));
  ASSERT_EQ(::pwrite(fd, index.data(), index.size(), 28), ssize_t(index.size()));
  ASSERT_EQ(::pwrite(fd, payload.data(), payload.size(), static_cast<off_t>(offset)),
            ssize_t(payload.size()));
  ASSERT_EQ(::pwrite(fd, footer.data(), footer.size(), static_cast<off_t>(offset + payload.size())),
            ssize_t(footer.size()));
  ::close(fd);
  for (bool mmap : {true, false}) {
    ReaderOptions o;
    o.use_mmap = mmap;
    Reader r(path, o);
    EXPECT_GT(r.file_size(), 5ull << 30);
    EXPECT_EQ(r.entry(0).offset, offset);
    EXPECT_EQ(r.decode(0, true),
              run::decode(reinterpret_cast<const uint8_t*>(payload.data()), payload.size()));
    uint64_t idx = 0;
    EXPECT_EQ(r.decode_batch(&idx, 1, 2, true).n_runs(), 1u);
  }
}

TEST(PackReader, UpstreamFixturePack) {
  const std::string fixture = a2test::fixture_path();
  auto fx = a2test::fixture_bytes();  // fails, naming the path, when it is missing
  a2test::TempDir dir;
  std::filesystem::create_directories(dir / "runs/sub");
  std::filesystem::copy_file(fixture, dir / "runs/sub/example.a2run2");
  std::string v1 = a2test::synthetic_bytes(1, 10);
  a2test::write_bytes(dir / "runs/a.a2run2", v1.data(), v1.size());
  BuildSummary s = pack_dir(dir / "runs", dir / "fx.a2pack", {}, 2, false, {}, {});
  EXPECT_EQ(s.entries, 2u);
  Reader r(dir / "fx.a2pack");
  // "a.a2run2" sorts before "sub/..." (component order).
  EXPECT_EQ(r.kind(0), run::Kind::v1);
  EntryBytes b = r.payload(1, true);
  EXPECT_EQ(std::vector<uint8_t>(b.data, b.data + b.size), fx);
  run::Run x = r.decode(1, true);
  EXPECT_EQ(x.meta.steps, 959u);
  EXPECT_EQ(x.meta.max_score, 20504u);
  EXPECT_EQ(x.final_board, 0x100100010232001bull);
  EXPECT_EQ(r.stats(1).stats.max_len, 959u);
  r.validate(true, 2, {});
}

// ---------------------------------------------------------------- stats block at open
namespace {
// The postcard part of a pack's stats block, where it lies in `bytes`.
size_t stats_body_at(const std::string& bytes) {
  uint64_t so;
  std::memcpy(&so, bytes.data() + bytes.size() - kFooterSize + 16, 8);
  return static_cast<size_t>(so) + 4;
}

// `pack` with its stats block replaced by `s`: the block sits right before
// the footer, which stays as it is (stats_offset does not move).
std::string with_stats(const std::string& pack, const StatsBlock& s) {
  const size_t at = stats_body_at(pack) - 4;
  return pack.substr(0, at) + encode_stats_block(s) + pack.substr(pack.size() - kFooterSize);
}
}  // namespace

TEST(PackCorruption, StatsBlockIsCheckedAgainstItselfAndTheIndexAtOpen) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(9, 60);
  std::string good = write_pack(dir / "p.a2pack", payloads);
  Reader g(dir / "p.a2pack");
  ASSERT_TRUE(g.stats_problem().empty()) << g.stats_problem();
  const StatsBlock sb = *g.stats_block();
  const size_t body = stats_body_at(good);
  const std::string path = dir / "bad.a2pack";
  // Rewrite the block with one field changed (same encoded length, so the
  // rest of the file stays put) and check what open, stats and validate say.
  auto with = [&](const StatsBlock& s) {
    std::string bad = with_stats(good, s);
    a2test::write_bytes(path, bad.data(), bad.size());
    return std::make_unique<Reader>(path);
  };
  auto refused = [&](const StatsBlock& s, std::vector<std::string> words) {
    auto r = with(s);  // opens: the entries stay readable
    EXPECT_NO_THROW(r->decode(0, true));
    Error e = expect_error([&] { r->stats(1); });
    EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
    std::string msg = e.what();
    words.push_back(path);
    words.push_back(fmt::format("offset {}", body));
    for (auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' in " << msg;
    Error q = expect_error([&] { r->validate(false, 1, {}); });  // quick validate too
    EXPECT_EQ(q.status(), A2PACK_E_CORRUPT);
    EXPECT_NE(std::string(q.what()).find("stats block"), std::string::npos) << q.what();
    expect_error([&] { r->validate(true, 1, {}); });
  };
  StatsBlock s = sb;
  s.total_steps ^= 2;  // a flipped bit of the total: the mean no longer agrees
  refused(s, {"total_steps", fmt::format("{}", s.total_steps)});
  s = sb;
  s.mean_len = std::nextafter(sb.mean_len * (1 + 1e-9), 1e300);
  refused(s, {"mean_len", fmt::format("{}", s.mean_len), fmt::format("{}", sb.mean_len)});
  s = sb;
  s.p50 = sb.p90 + 1;
  refused(s, {"p50", "p90", fmt::format("{}", s.p50), fmt::format("{}", sb.p90)});
  s = sb;
  s.min_len = sb.max_len + 1;
  refused(s, {"min_len", fmt::format("{}", s.min_len)});
  // A total outside what the order statistics allow.
  s = sb;
  s.total_steps = sb.max_len * sb.count + 7;
  s.mean_len = static_cast<double>(s.total_steps) / static_cast<double>(s.count);
  refused(s, {"total_steps", fmt::format("{}", s.total_steps)});
  // Lengths the entries' bytes cannot hold, every field consistent with the
  // others: a one-run pack whose block says 100000 steps more.
  {
    std::vector<std::string> one = {payloads[0]};
    std::string p1 = write_pack(dir / "one.a2pack", one);
    StatsBlock b = *Reader(dir / "one.a2pack").stats_block();
    const uint32_t l = b.max_len + 100000;
    b.min_len = b.max_len = b.p50 = b.p90 = b.p99 = l;
    b.total_steps = l;
    b.mean_len = l;
    std::string bad = with_stats(p1, b);
    a2test::write_bytes(path, bad.data(), bad.size());
    Reader r(path);
    Error e = expect_error([&] { r.stats(1); });
    // The runs' headers are read to tell whose fault it is: the block's.
    const uint32_t real = Reader(dir / "one.a2pack").stats_block()->max_len;
    EXPECT_NE(std::string(e.what()).find(fmt::format("max_len {} (the runs: {})", l, real)),
              std::string::npos)
        << e.what();
    EXPECT_EQ(expect_error([&] { r.validate(false, 1, {}); }).status(), A2PACK_E_CORRUPT);
  }
  // Runs whose meta.steps claims more steps than they store (upstream
  // decodes them): the block is right about them, and nothing is refused.
  {
    std::vector<std::string> forged;
    for (uint32_t claim : {4294967295u, 0u, 1u}) {
      run::Run x = a2test::synthetic_run(claim % 7, 150, true);
      x.meta.steps = claim;
      forged.push_back(run::encode_v2(x));
    }
    write_pack(dir / "forged.a2pack", forged);
    Reader r(dir / "forged.a2pack");
    EXPECT_EQ(r.stats(1).stats.max_len, 4294967295u);
    EXPECT_TRUE(r.stats_problem().empty());
    r.validate(false, 1, {});
    r.validate(true, 1, {});
  }
  // The untouched block passes, and so does an upstream pack's.
  EXPECT_EQ(with(sb)->stats(1).stats, sb);
  std::string up = a2test::upstream_pack(payloads, 4096, true, stats_block_of(payloads));
  a2test::write_bytes(path, up.data(), up.size());
  EXPECT_TRUE(Reader(path).stats_problem().empty());
}

TEST(PackCorruption, EveryFlipOfTotalAndMeanIsCaughtWithoutReadingARun) {
  // Every bit of total_steps and of mean_len's sign, exponent and upper 48
  // mantissa bits: open notices (or refuses a block that no longer parses).
  a2test::TempDir dir;
  auto payloads = mixed_payloads(7, 80);
  std::string good = write_pack(dir / "p.a2pack", payloads);
  const size_t body = stats_body_at(good);
  Reader g(dir / "p.a2pack");
  // Postcard: count varint, total_steps varint, min, max varints, mean f64.
  const StatsBlock& sb = *g.stats_block();
  auto vsize = [](uint64_t v) { size_t n = 1; while (v >= 128) { v >>= 7; ++n; } return n; };
  const size_t total_at = body + vsize(sb.count);
  const size_t mean_at = total_at + vsize(sb.total_steps) + vsize(sb.min_len) + vsize(sb.max_len);
  std::vector<std::pair<size_t, int>> flips;
  for (size_t k = 0; k < vsize(sb.total_steps); ++k)
    for (int bit = 0; bit < 7; ++bit) flips.push_back({total_at + k, bit});
  for (size_t k = 2; k < 8; ++k)
    for (int bit = 0; bit < 8; ++bit) flips.push_back({mean_at + k, bit});
  const std::string path = dir / "bad.a2pack";
  for (auto [at, bit] : flips) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ (1 << bit));
    a2test::write_bytes(path, bad.data(), bad.size());
    std::string msg;
    a2pack_status st = a2test::status_of([&] { Reader(path).stats(1); }, &msg);
    EXPECT_EQ(st, A2PACK_E_CORRUPT) << "byte " << at << " bit " << bit;
    EXPECT_NE(msg.find("stats block"), std::string::npos) << msg;
  }
}

TEST(PackCorruption, FullValidationPrintsTheDifferingMeanLen) {
  a2test::TempDir dir;
  auto payloads = mixed_payloads(5, 30);
  std::string good = write_pack(dir / "p.a2pack", payloads);
  Reader g(dir / "p.a2pack");
  StatsBlock s = *g.stats_block();
  // The lowest mantissa bit: below what open can tell from rounding, and
  // the two means print alike with a fixed handful of digits.
  const double runs_mean = s.mean_len;
  uint64_t raw;
  std::memcpy(&raw, &s.mean_len, 8);
  raw ^= 1;
  std::memcpy(&s.mean_len, &raw, 8);
  std::string bad = with_stats(good, s);
  a2test::write_bytes(dir / "m.a2pack", bad.data(), bad.size());
  Reader r(dir / "m.a2pack");
  Error e = expect_error([&] { r.validate(true, 1, {}); });
  std::string msg = e.what();
  EXPECT_NE(msg.find(fmt::format("mean_len {} (the runs: {})", s.mean_len, runs_mean)),
            std::string::npos)
      << msg;
  EXPECT_NE(fmt::format("{}", s.mean_len), fmt::format("{}", runs_mean));
  EXPECT_EQ(msg.find("total_steps " + std::to_string(s.total_steps) + " (the runs"), std::string::npos)
      << "only the differing fields are marked: " << msg;
}

// ---------------------------------------------------------------- overlapping entries
namespace {
// Recompute index and footer CRCs after editing the index of `n` entries.
std::string reindex(std::string b, size_t n) {
  size_t fo = b.size() - kFooterSize;
  uint32_t ic = crc32c::compute(b.data() + kHeaderSize, kEntrySize * n);
  std::memcpy(b.data() + fo + 8, &ic, 4);
  uint32_t fc = crc32c::compute(b.data() + fo, 24);
  std::memcpy(b.data() + fo + 24, &fc, 4);
  return b;
}
}  // namespace

TEST(PackCorruption, EntriesSharingPayloadBytesAreRefusedAtOpen) {
  a2test::TempDir dir;
  // v1 runs only: a v1 file ends with its own CRC32C, so the CRC32C of every
  // v1 payload is the same constant and the index's CRC cannot tell them
  // apart: entry 1 pointed at entry 0's bytes passes every CRC.
  std::vector<std::string> v1;
  for (uint64_t seed : {1, 3, 5, 7}) v1.push_back(a2test::synthetic_bytes(seed, 30 + seed));
  std::string good = a2test::upstream_pack(v1, 4096, true, "");
  const std::string path = dir / "x.a2pack";
  auto entry_at = [&](const std::string& b, size_t i, uint64_t& off, uint32_t& len, uint32_t& crc) {
    std::memcpy(&off, b.data() + kHeaderSize + kEntrySize * i, 8);
    std::memcpy(&len, b.data() + kHeaderSize + kEntrySize * i + 8, 4);
    std::memcpy(&crc, b.data() + kHeaderSize + kEntrySize * i + 16, 4);
  };
  auto set_entry = [&](std::string& b, size_t i, uint64_t off, uint32_t len) {
    std::memcpy(b.data() + kHeaderSize + kEntrySize * i, &off, 8);
    std::memcpy(b.data() + kHeaderSize + kEntrySize * i + 8, &len, 4);
  };
  uint64_t off0, off1, off2, off3;
  uint32_t len0, len1, len2, len3, crc0, crc1, crc2, crc3;
  entry_at(good, 0, off0, len0, crc0);
  entry_at(good, 1, off1, len1, crc1);
  entry_at(good, 2, off2, len2, crc2);
  entry_at(good, 3, off3, len3, crc3);
  ASSERT_EQ(crc0, crc1);  // every v1 payload's CRC32C is the same constant
  auto refused = [&](const std::string& bytes, const std::vector<std::string>& words) {
    a2test::write_bytes(path, bytes.data(), bytes.size());
    for (bool mmap : {true, false}) {
      ReaderOptions o;
      o.use_mmap = mmap;
      Error e = expect_error([&] { Reader r(path, o); });
      EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
      for (auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  // Entry 1 redirected to entry 0's payload (offset and length): a duplicate.
  std::string dup = good;
  set_entry(dup, 1, off0, len0);
  refused(reindex(dup, 4), {"entries 0 and 1", "the same payload twice",
                            fmt::format("[{}, {})", off0, off0 + len0)});
  // Entry 2 starting inside entry 1.
  std::string part = good;
  set_entry(part, 2, off1 + 8, len2);
  refused(reindex(part, 4), {"entries 1 and 2", fmt::format("offset {}", off1 + 8)});
  // An index not in offset order: entry 3 duplicated into slot 0, so the
  // sorted pass cannot see it.
  std::string back = good;
  set_entry(back, 0, off3, len3);
  refused(reindex(back, 4), {"entries 0 and 3"});
  // Not in offset order but disjoint: fine (entries 0 and 3 swapped).
  std::string swapped = good;
  set_entry(swapped, 0, off3, len3);
  set_entry(swapped, 3, off0, len0);
  swapped = reindex(swapped, 4);
  a2test::write_bytes(path, swapped.data(), swapped.size());
  Reader r(path);
  EXPECT_EQ(r.decode(0, true), run::decode(reinterpret_cast<const uint8_t*>(v1[3].data()), v1[3].size()));
  r.validate(true, 1, {});
}

// ---------------------------------------------------------------- non-regular files
TEST(PackReader, AFifoIsRefusedNotWaitedFor) {
  a2test::TempDir dir;
  const std::string fifo = dir / "p.a2pack";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Held open for writing, so that a reader which did open it (the bug)
  // would not block in open() and this test fails instead of hanging.
  int keep = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(keep, 0);
  for (bool mmap : {true, false}) {
    ReaderOptions o;
    o.use_mmap = mmap;
    std::string msg;
    EXPECT_EQ(a2test::status_of([&] { Reader r(fifo, o); }, &msg), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_NE(msg.find(fifo + ": is a FIFO"), std::string::npos) << msg;
  }
  std::string msg;
  EXPECT_EQ(a2test::status_of([&] { read_file(fifo); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  EXPECT_EQ(a2test::status_of([&] { MappedFile m(fifo); }), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2test::status_of([&] { run::load(fifo); }), A2PACK_E_INVALID_ARGUMENT);
  // A character device is refused the same way; a folder still opens (its
  // callers say "is a folder"), a regular file as before.
  EXPECT_EQ(a2test::status_of([&] { ReadFd f("/dev/null"); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("character device"), std::string::npos) << msg;
  EXPECT_NO_THROW(ReadFd f(dir.path()));
  ::close(keep);
  // Nothing waits for a writer that never comes either.
  EXPECT_EQ(a2test::status_of([&] { Reader r(fifo); }), A2PACK_E_INVALID_ARGUMENT);
}
