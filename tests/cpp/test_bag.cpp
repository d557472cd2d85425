// Bagz record files: format bytes, writer/reader round trips for every option,
// sharding maps, and hostile files.
#include <gtest/gtest.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "bag/index.hpp"
#include "bag/reader.hpp"
#include "bag/shard_spec.hpp"
#include "bag/writer.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::bag;

namespace {

std::vector<std::string> sample_records(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    size_t len = i % 7 == 3 ? 0 : rng() % 300;  // some empty records
    std::string s(len, '\0');
    for (auto& c : s) c = static_cast<char>('a' + rng() % 4);  // compressible
    out.push_back(s);
  }
  return out;
}

void write_bag(const std::string& path, const std::vector<std::string>& recs, WriterOptions o = {}) {
  Writer w(path, o);
  for (const auto& r : recs) w.write(reinterpret_cast<const uint8_t*>(r.data()), r.size());
  w.commit();
}

std::vector<std::string> read_all(const Reader& r, uint32_t workers = 0) {
  Batch b = r.read_range(0, r.size(), workers);
  std::vector<std::string> out;
  for (size_t i = 0; i < b.size(); ++i) out.emplace_back(b.record(i));
  return out;
}

using a2test::status_of;

// Records idx through Reader::prepare + PendingRead::fill, each into its own string.
std::vector<std::string> fill_each(const Reader& r, const std::vector<uint64_t>& idx,
                                   uint32_t workers = 0) {
  PendingRead p = r.prepare(idx.data(), idx.size(), workers);
  EXPECT_EQ(p.size(), idx.size());
  std::vector<std::string> out(idx.size());
  std::vector<uint8_t*> dests(idx.size());
  uint64_t total = 0;
  for (size_t k = 0; k < idx.size(); ++k) {
    out[k].assign(p.sizes()[k], '\0');
    dests[k] = reinterpret_cast<uint8_t*>(out[k].data());
    total += p.sizes()[k];
  }
  EXPECT_EQ(p.bytes(), total);
  p.fill(dests.data());
  return out;
}

std::string bytes_of(const std::string& path) {
  auto v = a2test::read_bytes(path);
  return std::string(v.begin(), v.end());
}

}  // namespace

TEST(BagFormat, TailExampleBytes) {
  a2test::TempDir d;
  write_bag(d / "x.bag", {"abcdef", "123", "catcat"});
  std::string want = "abcdef123catcat";
  for (uint64_t l : {6, 9, 15}) want.append(reinterpret_cast<const char*>(&l), 8);
  EXPECT_EQ(bytes_of(d / "x.bag"), want);
}

TEST(BagFormat, EmptyWriterGivesEmptyFile) {
  a2test::TempDir d;
  write_bag(d / "e.bagz", {});
  EXPECT_EQ(std::filesystem::file_size(d / "e.bagz"), 0u);
  Reader r({d / "e.bagz"}, {});
  EXPECT_EQ(r.size(), 0u);
}

TEST(BagFormat, ZstdFramesCarryContentSizeNoChecksum) {
  a2test::TempDir d;
  write_bag(d / "z.bagz", {"hello hello hello hello", ""});
  std::string b = bytes_of(d / "z.bagz");
  ASSERT_GE(b.size(), 5u);
  EXPECT_EQ(static_cast<uint8_t>(b[0]), 0x28);  // zstd magic
  uint8_t fhd = static_cast<uint8_t>(b[4]);
  EXPECT_EQ(fhd & 0x04, 0);     // no checksum
  EXPECT_NE(fhd & 0x20, 0);     // single segment: content size present
  // The empty record stays empty: the last two limits are equal.
  uint64_t l0, l1;
  std::memcpy(&l0, b.data() + b.size() - 16, 8);
  std::memcpy(&l1, b.data() + b.size() - 8, 8);
  EXPECT_EQ(l0, l1);
  EXPECT_EQ(ZSTD_getFrameContentSize(b.data(), l0), 23u);
}

// The zstd the library runs is the one its headers describe (a bundled
// build must not pick up the system libzstd at link or load time).
TEST(BagFormat, ZstdLibraryMatchesItsHeader) {
  EXPECT_EQ(ZSTD_versionNumber(), static_cast<unsigned>(ZSTD_VERSION_NUMBER));
#ifdef A2PACK_ZSTD_BUNDLED
  EXPECT_EQ(std::string(ZSTD_versionString()), "1.5.7");
#endif
}

TEST(BagFormat, LimitsPathAndShardNames) {
  EXPECT_EQ(limits_path("a/b/c.bag"), "a/b/limits.c.bag");
  EXPECT_EQ(limits_path("c.bagz"), "limits.c.bagz");
  EXPECT_EQ(shard_name("x/d", 2, 4, ".bagz"), "x/d-00002-of-00004.bagz");
  EXPECT_TRUE(is_bagz_path("a.bagz"));
  EXPECT_FALSE(is_bagz_path("a.bag"));
  EXPECT_FALSE(is_bagz_path("bagz"));
}

TEST(BagShardSpec, Expansion) {
  auto v = expand_spec("d/n@3.bagz,other.bag,fs:/x/y.bag");
  std::vector<std::string> want = {"d/n-00000-of-00003.bagz", "d/n-00001-of-00003.bagz",
                                   "d/n-00002-of-00003.bagz", "other.bag", "/x/y.bag"};
  EXPECT_EQ(v, want);
  EXPECT_EQ(expand_spec("a@b/c.bag"), std::vector<std::string>{"a@b/c.bag"});
  EXPECT_EQ(expand_spec("me@host.bag"), std::vector<std::string>{"me@host.bag"});
  EXPECT_EQ(status_of([] { expand_spec("n@0.bag"); }), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([] { expand_spec("a.bag,,b.bag"); }), A2PACK_E_INVALID_ARGUMENT);
}

TEST(BagShardSpec, GlobFindsCount) {
  a2test::TempDir d;
  for (int i = 0; i < 3; ++i) write_bag(shard_name(d / "s", i, 3, ".bag"), {std::to_string(i)});
  auto v = expand_spec(d / "s@*.bag");
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[2], d / "s-00002-of-00003.bag");
  EXPECT_EQ(status_of([&] { expand_spec(d / "nothing@*.bag"); }), A2PACK_E_NOT_FOUND);
}

// Every writer option against every reader option.
struct RoundTripCase {
  Compression comp;
  LimitsPlacement place;
  LimitsStorage storage;
  CachePolicy cache;
  AccessPattern access;
  bool batch;
};

class BagRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(BagRoundTrip, ReadsBackWhatWasWritten) {
  const auto& c = GetParam();
  a2test::TempDir d;
  std::string path = d / (c.comp == Compression::zstd ? "r.bagz" : "r.bag");
  auto recs = sample_records(500);
  WriterOptions wo;
  wo.limits_placement = c.place;
  wo.workers = 2;
  {
    Writer w(path, wo);
    if (c.batch) {
      std::string all;
      std::vector<uint64_t> off{0};
      for (auto& r : recs) {
        all += r;
        off.push_back(all.size());
      }
      w.write_batch(reinterpret_cast<const uint8_t*>(all.data()), off.data(), recs.size());
    } else {
      for (auto& r : recs) w.write(reinterpret_cast<const uint8_t*>(r.data()), r.size());
    }
    w.commit();
  }
  EXPECT_EQ(std::filesystem::exists(limits_path(path)), c.place == LimitsPlacement::separate);
  ReaderOptions ro;
  ro.limits_placement = c.place;
  ro.limits_storage = c.storage;
  ro.cache_policy = c.cache;
  ro.access_pattern = c.access;
  Reader r({path}, ro);
  ASSERT_EQ(r.size(), recs.size());
  EXPECT_EQ(read_all(r), recs);
  EXPECT_EQ(read_all(r, 1), recs);
  // Random order with repeats.
  std::vector<uint64_t> idx = {499, 0, 3, 3, 250, 1, 498};
  Batch b = r.read(idx.data(), idx.size());
  for (size_t k = 0; k < idx.size(); ++k) EXPECT_EQ(b.record(k), recs[idx[k]]);
  // The same in two steps, into memory of the caller's.
  EXPECT_EQ(fill_each(r, idx), (std::vector<std::string>{recs[499], recs[0], recs[3], recs[3],
                                                          recs[250], recs[1], recs[498]}));
}

std::vector<RoundTripCase> all_cases() {
  std::vector<RoundTripCase> v;
  for (auto comp : {Compression::none, Compression::zstd})
    for (auto place : {LimitsPlacement::tail, LimitsPlacement::separate})
      for (auto storage : {LimitsStorage::on_disk, LimitsStorage::in_memory})
        for (auto cache : {CachePolicy::system, CachePolicy::drop_after_read, CachePolicy::direct_io})
          v.push_back({comp, place, storage, cache,
                       cache == CachePolicy::system ? AccessPattern::random : AccessPattern::sequential,
                       storage == LimitsStorage::in_memory});
  return v;
}
INSTANTIATE_TEST_SUITE_P(AllOptions, BagRoundTrip, ::testing::ValuesIn(all_cases()));

TEST(BagWriter, ZstdLevelsAndDictionary) {
  a2test::TempDir d;
  auto recs = sample_records(50);
  WriterOptions o;
  o.zstd.level = 19;
  write_bag(d / "l.bagz", recs, o);
  EXPECT_EQ(read_all(Reader({d / "l.bagz"}, {})), recs);
  o.zstd.level = -5;
  write_bag(d / "n.bagz", recs, o);
  EXPECT_EQ(read_all(Reader({d / "n.bagz"}, {})), recs);
  o.zstd.level = 3;
  o.zstd.dictionary = std::string(2000, 'a') + "abcdabcdbbbbcccc";
  write_bag(d / "d.bagz", recs, o);
  ReaderOptions ro;
  ro.zstd.dictionary = o.zstd.dictionary;
  EXPECT_EQ(read_all(Reader({d / "d.bagz"}, ro)), recs);
  o.zstd.level = 99;
  EXPECT_EQ(status_of([&] { Writer w(d / "bad.bagz", o); }), A2PACK_E_INVALID_ARGUMENT);
}

TEST(BagWriter, ExplicitCompressionOverridesExtension) {
  a2test::TempDir d;
  WriterOptions o;
  o.compression = Compression::zstd;
  write_bag(d / "z.bag", {"xxxxxxxxxxxxxxxxxxxxxxxx"}, o);
  EXPECT_EQ(static_cast<uint8_t>(bytes_of(d / "z.bag")[0]), 0x28);
  ReaderOptions ro;
  ro.compression = Compression::zstd;
  EXPECT_EQ(read_all(Reader({d / "z.bag"}, ro)), std::vector<std::string>{"xxxxxxxxxxxxxxxxxxxxxxxx"});
  // Read as stored: the raw frame comes back.
  ro.compression = Compression::none;
  EXPECT_EQ(read_all(Reader({d / "z.bag"}, ro))[0].substr(0, 4), std::string("\x28\xb5\x2f\xfd", 4));
}

TEST(BagWriter, UncommittedWriterLeavesNothing) {
  a2test::TempDir d;
  for (auto place : {LimitsPlacement::tail, LimitsPlacement::separate}) {
    WriterOptions o;
    o.limits_placement = place;
    {
      Writer w(d / "a.bag", o);
      w.write(reinterpret_cast<const uint8_t*>("abc"), 3);
      w.flush();
    }
    EXPECT_TRUE(std::filesystem::is_empty(d.path()));
  }
}

TEST(BagWriter, NotDurableWritesTheSameBytes) {
  // durable = false only skips the fsyncs: same bytes, same atomic rename.
  a2test::TempDir d;
  auto recs = sample_records(500);
  for (auto place : {LimitsPlacement::tail, LimitsPlacement::separate}) {
    for (const char* ext : {".bag", ".bagz"}) {
      WriterOptions o;
      o.limits_placement = place;
      std::string tag = place == LimitsPlacement::tail ? "t" : "s";
      std::string a = d / ("durable" + tag + ext), b = d / ("fast" + tag + ext);
      write_bag(a, recs, o);
      o.durable = false;
      {
        Writer w(b, o);
        w.write(reinterpret_cast<const uint8_t*>("x"), 1);
        w.flush();
      }
      EXPECT_FALSE(std::filesystem::exists(b));  // abandoned: nothing under the name
      write_bag(b, recs, o);
      EXPECT_EQ(bytes_of(a), bytes_of(b));
      if (place == LimitsPlacement::separate)
        EXPECT_EQ(bytes_of(d / ("limits.durable" + tag + ext)),
                  bytes_of(d / ("limits.fast" + tag + ext)));
    }
  }
}

TEST(BagWriter, SeparateRewriteReplacesBothFiles) {
  a2test::TempDir d;
  WriterOptions o;
  o.limits_placement = LimitsPlacement::separate;
  write_bag(d / "s.bag", {"old", "old2"}, o);
  write_bag(d / "s.bag", {"new"}, o);
  ReaderOptions ro;
  ro.limits_placement = LimitsPlacement::separate;
  EXPECT_EQ(read_all(Reader({d / "s.bag"}, ro)), std::vector<std::string>{"new"});
}

namespace {
// The counter of the temporary name the next AtomicFile of this process takes.
uint64_t next_temp_counter(const std::string& dir) {
  AtomicFile probe(dir + "/probe");
  const std::string& t = probe.temp_path();
  return std::stoull(t.substr(t.rfind('-') + 1)) + 1;
}
}  // namespace

TEST(BagWriter, LinksPlantedAtTemporaryAndFinalNamesAreNeverFollowed) {
  // Someone who may write into the output folder plants links at the names
  // the writer will try next: existing files outside and dangling names.
  for (auto place : {LimitsPlacement::tail, LimitsPlacement::separate}) {
    for (bool durable : {true, false}) {
      a2test::TempDir d;
      std::filesystem::create_directories(d / "out");
      std::filesystem::create_directories(d / "outside");
      a2test::write_bytes(d / "outside/victim", "keep", 4);
      const auto before = a2test::tree_snapshot(d / "outside");
      const uint64_t n = next_temp_counter(d.path());
      a2test::plant_links_at_temp_names(d / "out", "x.bag", d / "outside/victim", n, 8);
      a2test::plant_links_at_temp_names(d / "out", "x.bag", d / "outside/missing", n + 8, 8);
      a2test::plant_links_at_temp_names(d / "out", "limits.x.bag", d / "outside/victim", n, 24);
      std::filesystem::create_symlink(d / "outside/victim", d / "out/x.bag");
      WriterOptions o;
      o.limits_placement = place;
      o.durable = durable;
      const auto recs = sample_records(50);
      write_bag(d / "out/x.bag", recs, o);
      EXPECT_EQ(a2test::tree_snapshot(d / "outside"), before);
      EXPECT_FALSE(std::filesystem::is_symlink(d / "out/x.bag"));  // the link was replaced
      ReaderOptions ro;
      ro.limits_placement = place;
      EXPECT_EQ(read_all(Reader({d / "out/x.bag"}, ro)), recs);
    }
  }
}

TEST(BagWriter, ClosedAndBatchErrors) {
  a2test::TempDir d;
  Writer w(d / "c.bag", {});
  uint64_t bad[] = {5, 3};
  EXPECT_EQ(status_of([&] { w.write_batch(reinterpret_cast<const uint8_t*>("abcdef"), bad, 1); }),
            A2PACK_E_INVALID_ARGUMENT);
  w.write(reinterpret_cast<const uint8_t*>("x"), 1);
  w.commit();
  w.commit();  // idempotent
  EXPECT_EQ(status_of([&] { w.write(reinterpret_cast<const uint8_t*>("x"), 1); }), A2PACK_E_CLOSED);
}

TEST(BagWriter, ManyRecordsSpillLimits) {
  a2test::TempDir d;
  const size_t n = (1u << 17) * 2 + 17;  // past the in-memory limit twice
  {
    Writer w(d / "m.bag", {});
    for (size_t i = 0; i < n; ++i) {
      uint8_t b = static_cast<uint8_t>(i);
      w.write(&b, i % 3 ? 1 : 0);
    }
    w.commit();
  }
  Reader r({d / "m.bag"}, {});
  ASSERT_EQ(r.size(), n);
  std::vector<uint64_t> idx = {0, 1, 2, n - 1, (1u << 17), (1u << 17) + 1};
  Batch b = r.read(idx.data(), idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    uint64_t i = idx[k];
    EXPECT_EQ(b.record(k).size(), i % 3 ? 1u : 0u);
    if (i % 3) {
      EXPECT_EQ(static_cast<uint8_t>(b.record(k)[0]), static_cast<uint8_t>(i));
    }
  }
}

// The two sharding examples of docs/bag.md ("Shards").
namespace {
// Global index -> (shard, local index) as those examples give them, then
// every record of the 17-record sets these tests write reads back in order.
struct Placement { uint64_t global; size_t shard; uint64_t local; };
void expect_sharding(Reader& r, std::initializer_list<Placement> table) {
  for (const Placement& m : table) {
    size_t s;
    uint64_t l;
    r.locate(m.global, s, l);
    EXPECT_EQ(s, m.shard) << m.global;
    EXPECT_EQ(l, m.local) << m.global;
  }
  auto all = read_all(r);
  ASSERT_EQ(all.size(), 17u);
  for (int i = 0; i < 17; ++i) EXPECT_EQ(all[i], std::to_string(i));
}
}  // namespace

TEST(BagSharding, ConcatenatedTable) {
  a2test::TempDir d;
  std::vector<int> sizes = {8, 4, 0, 5};
  int g = 0;
  for (int s = 0; s < 4; ++s) {
    std::vector<std::string> recs;
    for (int i = 0; i < sizes[s]; ++i) recs.push_back(std::to_string(g++));
    write_bag(shard_name(d / "c", s, 4, ".bag"), recs);
  }
  auto r = Reader::open(d / "c@4.bag", {});
  ASSERT_EQ(r->size(), 17u);
  expect_sharding(*r, {{0, 0, 0}, {1, 0, 1}, {2, 0, 2}, {7, 0, 7}, {8, 1, 0}, {9, 1, 1},
                       {11, 1, 3}, {12, 3, 0}, {15, 3, 3}, {16, 3, 4}});
}

TEST(BagSharding, InterleavedTable) {
  a2test::TempDir d;
  std::vector<int> sizes = {6, 6, 5};
  for (int s = 0; s < 3; ++s) {
    std::vector<std::string> recs;
    for (int i = 0; i < sizes[s]; ++i) recs.push_back(std::to_string(i * 3 + s));
    write_bag(shard_name(d / "i", s, 3, ".bagz"), recs);
  }
  ReaderOptions o;
  o.sharding = ShardingLayout::interleaved;
  auto r = Reader::open(d / "i@*.bagz", o);
  ASSERT_EQ(r->size(), 17u);
  expect_sharding(*r, {{0, 0, 0}, {1, 1, 0}, {2, 2, 0}, {6, 0, 2}, {7, 1, 2}, {8, 2, 2},
                       {15, 0, 5}, {16, 1, 5}});
}

TEST(BagSharding, InterleavedRejectsUnevenShards) {
  a2test::TempDir d;
  write_bag(d / "a.bag", {"1", "2"});
  write_bag(d / "b.bag", {"1", "2", "3", "4", "5"});
  ReaderOptions o;
  o.sharding = ShardingLayout::interleaved;
  std::string msg;
  EXPECT_EQ(status_of([&] { Reader r({d / "a.bag", d / "b.bag"}, o); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("never increase"), std::string::npos);
  EXPECT_EQ(status_of([&] { Reader r({d / "b.bag", d / "a.bag"}, o); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("within 1"), std::string::npos);
}

TEST(BagSharding, MixedCompressionList) {
  a2test::TempDir d;
  write_bag(d / "a.bag", {"plain"});
  write_bag(d / "b.bagz", {"squeezed", ""});
  auto r = Reader::open(d / "a.bag," + d / "b.bagz", {});
  EXPECT_EQ(read_all(*r), (std::vector<std::string>{"plain", "squeezed", ""}));
}

// ---------------------------------------------------------------- bad input

namespace {
void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
}  // namespace

TEST(BagBadInput, TruncatedLimits) {
  a2test::TempDir d;
  write_bag(d / "t.bag", {"abcdef", "123", "catcat"});
  std::string b = bytes_of(d / "t.bag");
  for (size_t cut : {1, 3, 9}) {
    std::string t = b.substr(0, b.size() - cut);
    a2test::write_bytes(d / "cut.bag", t.data(), t.size());
    std::string msg;
    EXPECT_EQ(status_of([&] { Reader r({d / "cut.bag"}, {}); }, &msg), A2PACK_E_CORRUPT) << cut;
    EXPECT_NE(msg.find("cut.bag"), std::string::npos) << msg;
  }
  a2test::write_bytes(d / "tiny.bag", "abc", 3);
  EXPECT_EQ(status_of([&] { Reader r({d / "tiny.bag"}, {}); }), A2PACK_E_CORRUPT);
  // Separate limits file that is not whole u64s.
  a2test::write_bytes(d / "s.bag", "abc", 3);
  a2test::write_bytes(d / "limits.s.bag", "\x03\0\0\0", 4);
  ReaderOptions o;
  o.limits_placement = LimitsPlacement::separate;
  EXPECT_EQ(status_of([&] { Reader r({d / "s.bag"}, o); }), A2PACK_E_CORRUPT);
}

TEST(BagBadInput, DecreasingLimitsNameShardAndRecord) {
  a2test::TempDir d;
  std::string f = "aaaabbbbcccc";
  for (uint64_t l : {4, 10, 8, 12}) put_u64(f, l);
  a2test::write_bytes(d / "dec.bag", f.data(), f.size());
  // ON_DISK: opening works, reading the bad record fails.
  Reader r({d / "dec.bag"}, {});
  EXPECT_EQ(r.size(), 4u);
  std::string msg;
  uint64_t i = 2;
  EXPECT_EQ(status_of([&] { r.read(&i, 1); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("dec.bag: record 2"), std::string::npos) << msg;
  i = 0;
  EXPECT_EQ(status_of([&] { r.read(&i, 1); }), A2PACK_OK);
  // IN_MEMORY: refused at open.
  ReaderOptions o;
  o.limits_storage = LimitsStorage::in_memory;
  EXPECT_EQ(status_of([&] { Reader r2({d / "dec.bag"}, o); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("record 2"), std::string::npos) << msg;
}

TEST(BagBadInput, LimitsPastRecords) {
  a2test::TempDir d;
  // Tail: a middle limit points past the records section.
  std::string f = "aaaabbbb";
  for (uint64_t l : {40, 8}) put_u64(f, l);
  a2test::write_bytes(d / "p.bag", f.data(), f.size());
  Reader r({d / "p.bag"}, {});
  uint64_t i = 0;
  std::string msg;
  EXPECT_EQ(status_of([&] { r.read(&i, 1); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("record 0"), std::string::npos) << msg;
  // Tail: the last limit points past the file.
  std::string g = "aaaa";
  put_u64(g, 400);
  a2test::write_bytes(d / "q.bag", g.data(), g.size());
  EXPECT_EQ(status_of([&] { Reader r2({d / "q.bag"}, {}); }), A2PACK_E_CORRUPT);
  // Separate: limits longer than the records file.
  a2test::write_bytes(d / "s.bag", "abc", 3);
  std::string l;
  put_u64(l, 2);
  put_u64(l, 30);
  a2test::write_bytes(d / "limits.s.bag", l.data(), l.size());
  ReaderOptions o;
  o.limits_placement = LimitsPlacement::separate;
  EXPECT_EQ(status_of([&] { Reader r3({d / "s.bag"}, o); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("record 1"), std::string::npos) << msg;
}

TEST(BagBadInput, CorruptZstdFrame) {
  a2test::TempDir d;
  write_bag(d / "z.bagz", {std::string(1000, 'q') + "tail", "fine"});
  std::string b = bytes_of(d / "z.bagz");
  std::string c = b;
  c[0] ^= 0xFF;  // bad magic in record 0
  a2test::write_bytes(d / "c.bagz", c.data(), c.size());
  for (auto cache : {CachePolicy::system, CachePolicy::drop_after_read}) {
    ReaderOptions o;
    o.cache_policy = cache;
    Reader r({d / "c.bagz"}, o);
    uint64_t i = 0;
    std::string msg;
    EXPECT_EQ(status_of([&] { r.read(&i, 1); }, &msg), A2PACK_E_CORRUPT);
    EXPECT_NE(msg.find("c.bagz: record 0"), std::string::npos) << msg;
    i = 1;
    EXPECT_EQ(status_of([&] { r.read(&i, 1); }), A2PACK_OK);
  }
  // Damage inside the compressed block.
  std::string e = b;
  uint64_t l0;
  std::memcpy(&l0, e.data() + e.size() - 16, 8);
  for (uint64_t k = 6; k < l0; ++k) e[k] = static_cast<char>(0xA5 ^ k);
  a2test::write_bytes(d / "e.bagz", e.data(), e.size());
  Reader r({d / "e.bagz"}, {});
  uint64_t i = 0;
  EXPECT_EQ(status_of([&] { r.read(&i, 1); }), A2PACK_E_CORRUPT);
  // The two-step read: a bad header fails at prepare, a bad block at fill.
  std::string msg;
  Reader rc({d / "c.bagz"}, {});
  EXPECT_EQ(status_of([&] { fill_each(rc, {1, 0}); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("c.bagz: record 0"), std::string::npos) << msg;
  // A header that claims one byte more than the block holds: sized at
  // prepare, refused at fill. (Single-segment frame: magic, descriptor, then
  // the 2-byte content size at byte 5 - checked below.)
  std::string f = b;
  f[5] = static_cast<char>(f[5] + 1);
  ASSERT_EQ(ZSTD_getFrameContentSize(f.data(), l0), 1005u);
  a2test::write_bytes(d / "f.bagz", f.data(), f.size());
  Reader rf({d / "f.bagz"}, {});
  PendingRead p = rf.prepare(&i, 1);
  ASSERT_EQ(p.sizes()[0], 1005u);
  std::string out(1005, '\0');
  uint8_t* dst = reinterpret_cast<uint8_t*>(out.data());
  EXPECT_EQ(status_of([&] { p.fill(&dst); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("f.bagz: record 0"), std::string::npos) << msg;
}

// Frames written without their content size (zstd allows it; other writers
// do it) are decoded without one, through both read paths.
TEST(BagFormat, FramesWithoutContentSize) {
  a2test::TempDir d;
  std::vector<std::string> recs = {std::string(5000, 'x') + "end", "", "short", std::string(70000, 'y')};
  std::string file;
  std::vector<uint64_t> limits;
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
  for (size_t i = 0; i < recs.size(); ++i) {
    const auto& r = recs[i];
    if (!r.empty()) {
      std::string f(ZSTD_compressBound(r.size()), '\0');
      // Every other record keeps the size: a batch mixes both kinds.
      ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, static_cast<int>(i % 2));
      size_t n = ZSTD_compress2(c, f.data(), f.size(), r.data(), r.size());
      ASSERT_FALSE(ZSTD_isError(n));
      file.append(f.data(), n);
    }
    limits.push_back(file.size());
  }
  ZSTD_freeCCtx(c);
  for (uint64_t l : limits) put_u64(file, l);  // TAIL: the last limit is where they start
  a2test::write_bytes(d / "u.bagz", file.data(), file.size());
  EXPECT_EQ(ZSTD_getFrameContentSize(file.data(), limits[0]), ZSTD_CONTENTSIZE_UNKNOWN);
  for (auto cache : {CachePolicy::system, CachePolicy::drop_after_read}) {
    ReaderOptions o;
    o.cache_policy = cache;
    Reader r({d / "u.bagz"}, o);
    EXPECT_EQ(read_all(r), recs);
    std::vector<uint64_t> idx = {3, 0, 2, 1, 0};
    EXPECT_EQ(fill_each(r, idx),
              (std::vector<std::string>{recs[3], recs[0], recs[2], recs[1], recs[0]}));
  }
}

namespace {
// One zstd frame of `data` whose header carries no content size.
std::string unsized_frame(const std::string& data) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
  std::string f(ZSTD_compressBound(data.size()), '\0');
  size_t n = ZSTD_compress2(c, f.data(), f.size(), data.data(), data.size());
  ZSTD_freeCCtx(c);
  EXPECT_FALSE(ZSTD_isError(n));
  f.resize(n);
  return f;
}
}  // namespace

// A small frame without a content size that inflates far past the reader's
// limit is refused through every read path, naming file, record and limit;
// a record of exactly the limit still reads. (Memory is measured in
// tests/python/test_bag_memory.py: a process of its own.)
TEST(BagBadInput, UnsizedFramePastTheLimit) {
  a2test::TempDir d;
  constexpr uint64_t kLimit = 4u << 20;
  const std::string exact(kLimit, 'q');
  std::vector<std::string> frames = {unsized_frame("ok"), unsized_frame(std::string(40u << 20, 'z')),
                                     unsized_frame(exact), unsized_frame(exact + "!")};
  ASSERT_LT(frames[1].size(), 8192u);  // a bomb: 40 MiB from a few KB
  std::string file;
  std::vector<uint64_t> limits;
  for (const auto& f : frames) limits.push_back((file += f).size());
  for (uint64_t l : limits) put_u64(file, l);
  a2test::write_bytes(d / "b.bagz", file.data(), file.size());
  auto expect_refused = [&](const std::function<void()>& f, uint64_t record) {
    std::string msg;
    EXPECT_EQ(status_of(f, &msg), A2PACK_E_UNSUPPORTED) << msg;
    EXPECT_NE(msg.find("b.bagz: record " + std::to_string(record) + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find("limit of 4194304 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_record_bytes"), std::string::npos) << msg;
  };
  for (auto cache : {CachePolicy::system, CachePolicy::drop_after_read}) {
    ReaderOptions o;
    o.cache_policy = cache;
    o.max_record_bytes = kLimit;
    Reader r({d / "b.bagz"}, o);
    uint64_t one = 1, three = 3;
    std::vector<uint64_t> idx = {0, 1};
    uint64_t size = 0;
    expect_refused([&] { r.read(&one, 1); }, 1);
    expect_refused([&] { r.read_range(0, 2); }, 1);
    expect_refused([&] { r.prepare(idx.data(), idx.size()); }, 1);
    expect_refused([&] { r.sizes(&one, 1, &size); }, 1);
    expect_refused([&] { Index index(r, nullptr, r.size(), 0); }, 1);
    expect_refused([&] { r.read(&three, 1); }, 3);
    // The limit itself is allowed, and the records beside the bomb read.
    EXPECT_EQ(fill_each(r, {2, 0}), (std::vector<std::string>{exact, "ok"}));
    std::vector<uint64_t> sizes(2), which = {0, 2};
    r.sizes(which.data(), 2, sizes.data());
    EXPECT_EQ(sizes, (std::vector<uint64_t>{2, kLimit}));
  }
  // The codec alone, at the boundary: limit bytes decode, limit + 1 do not.
  ZstdCodec codec({});
  const auto* f2 = reinterpret_cast<const uint8_t*>(frames[2].data());
  GrowBuffer out = codec.decompress_unknown(f2, frames[2].size(), "x", 2, kLimit);
  ASSERT_EQ(out.size(), kLimit);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), out.size()), exact);
  EXPECT_EQ(status_of([&] { codec.decompress_unknown(f2, frames[2].size(), "x", 2, kLimit - 1); }),
            A2PACK_E_UNSUPPORTED);
  EXPECT_EQ(codec.decoded_length(f2, frames[2].size(), "x", 2, kLimit), kLimit);
  EXPECT_EQ(status_of([&] { codec.decoded_length(f2, frames[2].size(), "x", 2, kLimit - 1); }),
            A2PACK_E_UNSUPPORTED);
}

// The buffer frames of unknown size decode into keeps its bytes as it moves
// from the heap to pages of its own and grows there.
TEST(BagFormat, GrowBufferKeepsItsBytes) {
  GrowBuffer b;
  EXPECT_FALSE(b);
  std::string want;
  for (size_t step : {size_t{100}, size_t{1} << 19, size_t{3} << 20, size_t{9} << 20, size_t{1}}) {
    b.reserve(b.size() + step);
    ASSERT_GE(b.capacity(), b.size() + step);
    for (size_t i = 0; i < step; ++i) b.tail()[i] = static_cast<uint8_t>((want.size() + i) * 131);
    for (size_t i = 0; i < step; ++i) want += static_cast<char>((want.size()) * 131);
    b.append(step);
  }
  b.reserve(b.size() + 10);
  b.append(10);
  b.trim(10);
  ASSERT_EQ(b.size(), want.size());
  GrowBuffer moved = std::move(b);
  EXPECT_FALSE(b);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(moved.data()), moved.size()), want);
}

TEST(BagBadInput, MissingFiles) {
  a2test::TempDir d;
  std::string msg;
  EXPECT_EQ(status_of([&] { Reader::open(d / "none.bag", {}); }, &msg), A2PACK_E_NOT_FOUND);
  EXPECT_NE(msg.find("none.bag"), std::string::npos);
  write_bag(shard_name(d / "s", 0, 2, ".bag"), {"a"});
  EXPECT_EQ(status_of([&] { Reader::open(d / "s@2.bag", {}); }, &msg), A2PACK_E_NOT_FOUND);
  EXPECT_NE(msg.find("s-00001-of-00002.bag"), std::string::npos) << msg;
  write_bag(d / "t.bag", {"a"});
  ReaderOptions o;
  o.limits_placement = LimitsPlacement::separate;
  EXPECT_EQ(status_of([&] { Reader r({d / "t.bag"}, o); }, &msg), A2PACK_E_NOT_FOUND);
  EXPECT_NE(msg.find("limits.t.bag"), std::string::npos) << msg;
}

TEST(BagBadInput, IndexOutOfRange) {
  a2test::TempDir d;
  write_bag(d / "o.bag", {"a", "b"});
  Reader r({d / "o.bag"}, {});
  uint64_t idx[] = {0, 2};
  std::string msg;
  EXPECT_EQ(status_of([&] { r.read(idx, 2); }, &msg), A2PACK_E_OUT_OF_RANGE);
  EXPECT_NE(msg.find("indices[1] = 2"), std::string::npos) << msg;
  EXPECT_EQ(status_of([&] { r.read_range(1, 2); }), A2PACK_E_OUT_OF_RANGE);
}

TEST(BagCache, DirectIoFallbackAndAlignment) {
  a2test::TempDir d;
  auto recs = sample_records(300);
  write_bag(d / "f.bagz", recs);
  ReaderOptions o;
  o.cache_policy = CachePolicy::direct_io;
  o.refuse_direct_io = true;
  Reader fb({d / "f.bagz"}, o);
  EXPECT_EQ(fb.shard(0).records().mode(), "buffered fallback (O_DIRECT refused)");
  EXPECT_EQ(read_all(fb), recs);
  o.refuse_direct_io = false;
  Reader dr({d / "f.bagz"}, o);
  std::string mode = dr.shard(0).records().mode();
  // Either the filesystem takes O_DIRECT (alignment a power of two >= 512) or it refuses.
  if (mode.rfind("o_direct/", 0) == 0) {
    size_t a = dr.shard(0).records().direct_alignment();
    EXPECT_GE(a, 512u);
    EXPECT_EQ(a & (a - 1), 0u);
  } else {
    EXPECT_EQ(mode, "buffered fallback (O_DIRECT refused)");
  }
  EXPECT_EQ(read_all(dr), recs);
}

TEST(BagIndex, FirstAndAllPositions) {
  a2test::TempDir d;
  write_bag(d / "k.bagz", {"a", "b", "a", "", "c", "a", ""});
  Reader r({d / "k.bagz"}, {});
  Index idx(r, nullptr, r.size(), 0);
  EXPECT_EQ(idx.unique(), 4u);
  auto a = idx.find("a");
  EXPECT_EQ(std::vector<uint64_t>(a.begin(), a.end()), (std::vector<uint64_t>{0, 2, 5}));
  auto e = idx.find("");
  EXPECT_EQ(std::vector<uint64_t>(e.begin(), e.end()), (std::vector<uint64_t>{3, 6}));
  EXPECT_TRUE(idx.find("zz").empty());
  uint64_t sub[] = {5, 4, 3};
  Index part(r, sub, 3, 1);
  auto pa = part.find("a");
  EXPECT_EQ(std::vector<uint64_t>(pa.begin(), pa.end()), (std::vector<uint64_t>{0}));
  EXPECT_EQ(part.unique(), 3u);
}
