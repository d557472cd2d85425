// The sharded layout and its reader: a sharded build holds exactly the rows
// and runs of a single-file build, in shards of whole runs; an append adds
// shards and leaves the old ones alone, and is old-or-new at every crash
// point; the block-shuffle sampler's epochs, deal and checkpoints; the
// shard stream's budget, prefetch and batches, and a feed over the shards
// that answers what the stream answers and loads its states.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "dataset/block_sampler.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/npy.hpp"
#include "dataset/shard_cache.hpp"
#include "feed/feed.hpp"
#include "feed/shard_stream.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;
using a2pack::feed::ShardStream;
using a2pack::feed::ShardStreamOptions;
using dstest::make_run;
using dstest::run_child;
namespace fs = std::filesystem;

namespace {

BuildOptions opts(uint64_t shard_rows) {
  BuildOptions o;
  o.workers = 1;
  o.shard_rows = shard_rows;
  return o;
}

std::string rows_of(const std::string& dir) {
  OpenOptions o;
  o.workers = 1;
  auto d = Dataset::open(dir, o);
  EXPECT_TRUE(d->check_rows(1, 5).empty());
  return std::string(reinterpret_cast<const char*>(d->data()), d->rows() * 32);
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> n;
  for (const auto& e : fs::directory_iterator(dir)) n.insert(e.path().filename());
  return n;
}

// Runs of 1..40 steps: 70 in `runs`, 30 in `more`.
struct Folders {
  a2test::TempDir tmp;
  std::vector<run::Run> a, b;
  Folders() {
    for (int i = 0; i < 70; ++i) a.push_back(make_run(i, 1 + (i * 7) % 40));
    for (int i = 0; i < 30; ++i) b.push_back(make_run(500 + i, 1 + (i * 11) % 40));
    dstest::write_runs(tmp / "runs", a);
    dstest::write_runs(tmp / "more", b);
  }
};


}  // namespace

TEST(DatasetShards, BuildHoldsTheSingleFileRowsInShardsOfWholeRuns) {
  Folders f;
  DirSource src(f.tmp / "runs");
  build(src, f.tmp / "one", opts(0));
  build(src, f.tmp / "sh", opts(100));
  EXPECT_EQ(rows_of(f.tmp / "sh"), rows_of(f.tmp / "one"));
  auto m = read_manifest(f.tmp / "sh");
  ASSERT_TRUE(m && m->sharded);
  EXPECT_EQ(m->format_version, kShardedFormatVersion);
  EXPECT_EQ(m->steps_crc32c, read_manifest(f.tmp / "one")->steps_crc32c);
  ASSERT_GT(m->shards.size(), 5u);
  uint64_t row = 0;
  std::set<uint32_t> seen_runs;
  for (size_t i = 0; i < m->shards.size(); ++i) {
    const auto& s = m->shards[i];
    EXPECT_EQ(s.file, shard_file_name(i));
    EXPECT_EQ(s.first_row, row);
    EXPECT_LE(s.rows, 100u);
    // A plain .npy of the step dtype, whose runs start and end inside it.
    ReadFd fd(f.tmp / "sh" + "/" + s.file);
    NpyInfo info = read_npy_info(fd);
    ASSERT_EQ(info.rows, s.rows);
    std::vector<uint8_t> data(s.rows * 32);
    fd.pread_exact(data.data(), data.size(), info.data_offset);
    std::set<uint32_t> runs;
    for (uint64_t r = 0; r < s.rows; ++r) {
      uint32_t id;
      std::memcpy(&id, data.data() + r * 32 + 26, 4);
      runs.insert(id);
    }
    EXPECT_EQ(runs.size(), s.runs);
    for (uint32_t id : runs) EXPECT_TRUE(seen_runs.insert(id).second) << "run " << id << " spans shards";
    row += s.rows;
  }
  EXPECT_EQ(row, m->rows);
  EXPECT_EQ(names_in(f.tmp / "sh").count("steps.npy"), 0u);
}

TEST(DatasetShards, ARunLongerThanTheShardSizeGetsAShardOfItsOwn) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "runs", {make_run(1, 5), make_run(2, 50), make_run(3, 5)});
  DirSource src(tmp / "runs");
  build(src, tmp / "sh", opts(10));
  auto m = read_manifest(tmp / "sh");
  ASSERT_EQ(m->shards.size(), 3u);
  EXPECT_EQ(m->shards[1].rows, 50u);
  EXPECT_EQ(m->shards[1].runs, 1u);
}

TEST(DatasetShards, AppendAddsShardsAndLeavesTheOldOnesAlone) {
  Folders f;
  DirSource src(f.tmp / "runs"), more(f.tmp / "more");
  build(src, f.tmp / "one", opts(0));
  append(more, f.tmp / "one", opts(0));
  build(src, f.tmp / "sh", opts(100));
  const auto before = read_manifest(f.tmp / "sh");
  std::vector<std::pair<ino_t, std::string>> old;
  for (const auto& s : before->shards) {
    struct stat st;
    ASSERT_EQ(::stat((f.tmp / "sh" + "/" + s.file).c_str(), &st), 0);
    auto bytes = read_file(f.tmp / "sh" + "/" + s.file);
    old.emplace_back(st.st_ino, std::string(bytes.begin(), bytes.end()));
  }
  BuildResult r = append(more, f.tmp / "sh", opts(0));
  EXPECT_FALSE(r.steps_copied);
  EXPECT_EQ(rows_of(f.tmp / "sh"), rows_of(f.tmp / "one"));
  const auto after = read_manifest(f.tmp / "sh");
  ASSERT_GT(after->shards.size(), before->shards.size());
  for (size_t i = 0; i < before->shards.size(); ++i) {
    struct stat st;
    ASSERT_EQ(::stat((f.tmp / "sh" + "/" + before->shards[i].file).c_str(), &st), 0);
    auto bytes = read_file(f.tmp / "sh" + "/" + before->shards[i].file);
    EXPECT_EQ(st.st_ino, old[i].first);
    EXPECT_EQ(std::string(bytes.begin(), bytes.end()), old[i].second);
  }
  // The shard size asked for the new shards is recorded.
  dstest::write_runs(f.tmp / "third", {make_run(900, 30), make_run(901, 30)});
  DirSource third(f.tmp / "third");
  append(third, f.tmp / "sh", opts(30));
  auto m3 = read_manifest(f.tmp / "sh");
  EXPECT_EQ(m3->shard_rows, 30u);
  EXPECT_EQ(m3->shards.size(), after->shards.size() + 2);
  // A single-file dataset refuses shard_rows on append.
  EXPECT_THROW(append(third, f.tmp / "one", opts(30)), Error);
}

TEST(DatasetShards, AppendLeavesOldOrNewAtEveryCrashPoint) {
  Folders f;
  DirSource src(f.tmp / "runs"), more(f.tmp / "more");
  build(src, f.tmp / "ref", opts(60));
  const std::string old_rows = rows_of(f.tmp / "ref");
  append(more, f.tmp / "ref", opts(60));
  const std::string new_rows = rows_of(f.tmp / "ref");
  const auto ref_names = names_in(f.tmp / "ref");
  for (const char* point :
       {"append:rows-partial", "append:steps-synced", "append:journal-written",
        "append:db-inserted", "append:db-committed", "shards:first-installed",
        "append:steps-installed", "append:manifest-synced", "append:committed"}) {
    SCOPED_TRACE(point);
    a2test::TempDir t;
    const std::string ds = t / "ds";
    build(src, ds, opts(60));
    ASSERT_EQ(run_child(point, [&] { append(more, ds, opts(60)); }), kCrashExitCode);
    const bool committed = std::string(point) == "append:committed";
    EXPECT_EQ(rows_of(ds), committed ? new_rows : old_rows);
    auto v = verify(ds, false, 1);
    EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
    if (!committed) {
      append(more, ds, opts(60));
      EXPECT_EQ(rows_of(ds), new_rows);
      EXPECT_EQ(names_in(ds), ref_names);
    }
  }
}

TEST(DatasetShards, ContentNoJournalExplainsIsRefusedUntilDiscarded) {
  Folders f;
  DirSource src(f.tmp / "runs"), more(f.tmp / "more");
  const std::string ds = f.tmp / "sh";
  build(src, ds, opts(100));
  const size_t n = read_manifest(ds)->shards.size();
  fs::copy_file(fs::path(ds) / shard_file_name(0), fs::path(ds) / shard_file_name(n));
  OpenOptions oo;
  oo.workers = 1;
  auto d = Dataset::open(ds, oo);
  ASSERT_EQ(d->notes().size(), 1u);
  EXPECT_NE(d->notes()[0].find(shard_file_name(n)), std::string::npos);
  try {
    append(more, ds, opts(0));
    FAIL() << "appended over unexplained content";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
    EXPECT_NE(std::string(e.what()).find("1 shard files"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(fs::path(ds) / shard_file_name(n)));  // nothing deleted
  VerifyOptions vo;
  vo.repair = vo.discard_unrecorded = true;
  EXPECT_TRUE(verify(ds, vo, 1).ok);
  EXPECT_FALSE(fs::exists(fs::path(ds) / shard_file_name(n)));
  append(more, ds, opts(0));
}

TEST(DatasetShards, DamagedMissingAndMappedShardsAreClearErrors) {
  Folders f;
  DirSource src(f.tmp / "runs");
  const std::string ds = f.tmp / "sh";
  build(src, ds, opts(100));
  OpenOptions oo;
  oo.workers = 1;
  oo.mmap = true;
  try {
    Dataset::open(ds, oo);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_UNSUPPORTED);
  }
  oo.mmap = false;
  const std::string victim = ds + "/" + shard_file_name(2);
  {
    std::fstream io(victim, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(npy_header_size() + 40));
    io.put('\x7f');
  }
  try {
    Dataset::open(ds, oo);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_CHECKSUM);
    EXPECT_NE(std::string(e.what()).find(shard_file_name(2)), std::string::npos);
  }
  fs::remove(victim);
  try {
    Dataset::open(ds, oo);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find(shard_file_name(2)), std::string::npos);
  }
}

// ---------------------------------------------------------------- sampler
namespace {
BlockSampler sampler(std::vector<uint64_t> rows, uint32_t rank, uint32_t world, uint32_t window,
                     size_t batch = 7, uint64_t seed = 5) {
  std::vector<uint64_t> first(rows.size());
  std::exclusive_scan(rows.begin(), rows.end(), first.begin(), uint64_t{0});
  return BlockSampler(std::move(rows), std::move(first), seed, batch, rank, world, window, false);
}

// Every global row of the rank's stream in one epoch, in order.
std::vector<uint64_t> stream_rows(const BlockSampler& s, const BlockPlan& p) {
  std::vector<uint64_t> out;
  for (size_t w = 0; w < p.windows(); ++w) {
    auto order = s.window_order(p, w);
    for (uint32_t pos : order) out.push_back(s.pool_row(p, w, pos));
  }
  out.resize(p.stream_end);
  return out;
}
}  // namespace

TEST(BlockSampler, AnEpochVisitsEveryRowOnceDrawingEachBatchFromItsWindow) {
  std::vector<uint64_t> rows{30, 12, 25, 40, 8, 19, 33};
  auto s = sampler(rows, 0, 1, 2);
  auto p = s.plan(0);
  auto got = stream_rows(s, p);
  std::vector<uint64_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint64_t> all(167);
  std::iota(all.begin(), all.end(), uint64_t{0});
  EXPECT_EQ(sorted, all);
  EXPECT_EQ(p.batches, (167u + 6) / 7);
  // Each window's positions hold exactly its shards' rows.
  for (size_t w = 0; w < p.windows(); ++w) {
    std::set<uint32_t> shards;
    for (size_t j = w * 2; j < std::min<size_t>(p.shards.size(), w * 2 + 2); ++j)
      shards.insert(p.shards[j]);
    for (uint64_t pos = p.window_pos[w]; pos < p.window_pos[w + 1]; ++pos) {
      const uint64_t r = got[pos];
      uint32_t sh = 0;
      uint64_t acc = 0;
      while (r >= acc + rows[sh]) acc += rows[sh++];
      EXPECT_TRUE(shards.count(sh));
    }
  }
  // Deterministic; another epoch or seed is another order.
  EXPECT_EQ(stream_rows(sampler(rows, 0, 1, 2), sampler(rows, 0, 1, 2).plan(0)), got);
  EXPECT_NE(stream_rows(s, s.plan(1)), got);
  auto other = sampler(rows, 0, 1, 2, 7, 6);
  EXPECT_NE(stream_rows(other, other.plan(0)), got);
}

TEST(BlockSampler, RanksGetDisjointShardsAndTheSameNumberOfBatches) {
  std::vector<uint64_t> rows{30, 12, 25, 40, 8, 19, 33, 21, 17};
  for (uint32_t world : {2u, 3u}) {
    std::set<uint64_t> seen;
    uint64_t batches = UINT64_MAX;
    for (uint32_t r = 0; r < world; ++r) {
      auto s = sampler(rows, r, world, 1);
      auto p = s.plan(3);
      if (batches == UINT64_MAX) batches = p.batches;
      EXPECT_EQ(p.batches, batches);
      EXPECT_EQ(p.stream_end, p.batches * 7);
      for (uint64_t row : stream_rows(s, p)) EXPECT_TRUE(seen.insert(row).second);
    }
  }
  EXPECT_THROW(sampler({5, 5}, 0, 3, 1), Error);
}

TEST(BlockSampler, StatesResumeExactlyAndRefuseWhatCannotBeExact) {
  std::vector<uint64_t> rows{30, 12, 25, 40};
  auto s = sampler(rows, 1, 2, 1);
  const std::string st = s.save_state(4, 2, rows.size());
  auto pos = s.load_state(st.data(), st.size());
  EXPECT_EQ(pos.epoch, 4u);
  EXPECT_EQ(pos.next_batch, 2u);
  EXPECT_EQ(pos.shards, rows.size());
  // Mid-epoch: another rank count, window or shard set is refused.
  EXPECT_THROW(sampler(rows, 0, 1, 1).load_state(st.data(), st.size()), Error);
  EXPECT_THROW(sampler(rows, 1, 2, 2).load_state(st.data(), st.size()), Error);
  EXPECT_THROW(sampler({30, 12, 26, 40}, 1, 2, 1).load_state(st.data(), st.size()), Error);
  // Appended shards: the epoch finishes over the shards it started with.
  auto grown = sampler({30, 12, 25, 40, 50}, 1, 2, 1);
  auto gp = grown.load_state(st.data(), st.size());
  EXPECT_EQ(gp.shards, 4u);
  EXPECT_EQ(stream_rows(grown, grown.plan(4, gp.shards)), stream_rows(s, s.plan(4)));
  // At an epoch's start a new rank count is fine.
  const std::string start = s.save_state(5, 0, rows.size());
  EXPECT_EQ(sampler(rows, 0, 1, 1).load_state(start.data(), start.size()).epoch, 5u);
  // Damage and another batch size are refused.
  std::string bad = st;
  bad[20] ^= 1;
  EXPECT_THROW(s.load_state(bad.data(), bad.size()), Error);
  EXPECT_THROW(sampler(rows, 1, 2, 1, 8).load_state(st.data(), st.size()), Error);
}

// ---------------------------------------------------------------- stream
TEST(ShardStream, BatchesAreTheSamplersRowsWithinTheBudgetWithOrWithoutPrefetch) {
  Folders f;
  DirSource src(f.tmp / "runs");
  build(src, f.tmp / "sh", opts(100));
  OpenOptions oo;
  oo.workers = 1;
  auto d = Dataset::open(f.tmp / "sh", oo);
  std::vector<std::vector<int64_t>> seen[2];
  for (int prefetch = 0; prefetch < 2; ++prefetch) {
    ShardStreamOptions so;
    so.budget_bytes = 4 * 100 * 32;  // two windows of two shards
    so.batch_size = 64;
    so.seed = 9;
    so.prefetch = prefetch != 0;
    auto s = ShardStream::open(f.tmp / "sh", so);
    EXPECT_EQ(s->sampler().window(), 2u);
    std::vector<uint32_t> run_ids(64), want(64);
    std::vector<int64_t> idx(64), again(64);
    std::set<int64_t> rows;
    for (;;) {
      ColumnsOut out;
      out.run_ids = run_ids.data();
      const uint64_t b = s->next_batch();
      size_t n = s->next(out, idx.data());
      if (n == 0) break;
      EXPECT_EQ(s->stats().resident_bytes <= so.budget_bytes, true);
      // The same rows asked for by number, without loading.
      ASSERT_EQ(s->batch_indices(b, again.data()), n);
      EXPECT_TRUE(std::equal(idx.begin(), idx.begin() + static_cast<long>(n), again.begin()));
      ColumnsOut ref;
      ref.run_ids = want.data();
      d->gather_columns(idx.data(), n, ref, 1);
      EXPECT_TRUE(std::equal(run_ids.begin(), run_ids.begin() + static_cast<long>(n), want.begin()));
      for (size_t i = 0; i < n; ++i) EXPECT_TRUE(rows.insert(idx[i]).second);
      seen[prefetch].emplace_back(idx.begin(), idx.begin() + static_cast<long>(n));
    }
    EXPECT_EQ(rows.size(), d->rows());
    EXPECT_EQ(s->epoch(), 1u);
    EXPECT_GT(s->stats().evictions, 0u);
  }
  EXPECT_EQ(seen[0], seen[1]);
}

TEST(FeedOverShards, AnswersWhatTheShardStreamAnswersAndLoadsItsStates) {
  Folders f;
  DirSource src(f.tmp / "runs");
  build(src, f.tmp / "sh", opts(100));
  ShardStreamOptions so;
  so.budget_bytes = 4 * 100 * 32;
  so.batch_size = 64;
  so.seed = 9;
  auto s = ShardStream::open(f.tmp / "sh", so);
  feed::ShardOptions fo;
  fo.budget_bytes = so.budget_bytes;
  feed::Options o;
  o.batch_size = 64;
  o.seed = 9;
  o.depth = 2;
  o.pin = feed::Pin::kOff;
  o.spare_consumer_cpu = false;
  auto feed = feed::Feed::over_shards(f.tmp / "sh", fo, o);

  const feed::ShardsInfo info = feed->shards_info(0);
  EXPECT_EQ(info.manifest.rows, s->manifest().rows);
  EXPECT_EQ(info.manifest.shards.size(), s->manifest().shards.size());
  EXPECT_EQ(info.window_shards, s->sampler().window());
  EXPECT_EQ(info.batches, s->plan().batches);
  EXPECT_EQ(info.rank_rows, s->plan().rows);
  EXPECT_EQ(info.rank_shards, s->plan().shards.size());
  const uint64_t batches = info.batches;
  ASSERT_GT(batches, 3u);
  std::vector<int64_t> a(64), b(64);
  for (uint64_t k = 0; k < batches; ++k) {
    const size_t n = s->batch_indices(k, a.data());
    ASSERT_EQ(feed->batch_indices({0, k}, b.data()), n) << k;
    EXPECT_TRUE(std::equal(a.begin(), a.begin() + static_cast<long>(n), b.begin())) << k;
  }
  EXPECT_EQ(feed->batch_indices({0, batches}, b.data()), 0u);

  // The batch handed out next, against the rows it should hold.
  auto next_is = [&](uint64_t epoch, uint64_t batch) {
    bool ended = false;
    feed::Slot* slot = feed->next(std::chrono::milliseconds(-1), &ended);
    ASSERT_NE(slot, nullptr);
    const auto* idx =
        reinterpret_cast<const int64_t*>(slot->base + feed->ring().offset(feed::kIndices));
    const size_t n = feed->batch_indices({epoch, batch}, b.data());
    ASSERT_EQ(slot->rows, n);
    EXPECT_TRUE(std::equal(idx, idx + n, b.begin())) << epoch << "/" << batch;
    feed::Ring::release(slot);
  };
  // A shard stream's state, taken after three batches, loads into the feed.
  for (int k = 0; k < 3; ++k) {
    ColumnsOut out;
    ASSERT_GT(s->next(out, a.data()), 0u);
  }
  const std::string state = s->save_state();
  feed->load_state(state.data(), state.size());
  next_is(0, 3);
  // A seek hands out the batch it names next, in any epoch.
  feed->seek({1, 2});
  next_is(1, 2);
  next_is(1, 3);
  feed->seek({0, 0});
  next_is(0, 0);
  try {
    feed->seek({0, batches});
    FAIL() << "a batch past the epoch's was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("no batch"), std::string::npos) << e.what();
  }
  next_is(0, 1);  // unchanged by the refused seek
  // A damaged shard stream state changes nothing either.
  std::string bad = state;
  bad[20] = static_cast<char>(bad[20] ^ 1);
  EXPECT_THROW(feed->load_state(bad.data(), bad.size()), Error);
  next_is(0, 2);
}

TEST(ShardCache, TakesInAppendedShardsWhileGathersRunAndRefusesChangedOnes) {
  Folders f;
  DirSource src(f.tmp / "runs"), more(f.tmp / "more");
  build(src, f.tmp / "sh", opts(100));
  ShardCacheOptions co;
  co.budget_bytes = 4 * 100 * 32;  // two windows of two shards
  std::shared_ptr<ShardCache> c = ShardCache::open(f.tmp / "sh", co);
  const uint64_t n = c->rows();
  const size_t shards = c->layout()->shards();
  EXPECT_FALSE(c->grow(*read_manifest(f.tmp / "sh"), 2));  // nothing new
  // Two threads gather the old rows while the cache takes the new shards in.
  std::atomic<bool> stop{false};
  std::vector<std::thread> gatherers;
  for (uint64_t t = 0; t < 2; ++t)
    gatherers.emplace_back([&, t] {
      std::vector<uint32_t> ids(16);
      std::vector<int64_t> idx(16);
      uint64_t x = t + 1;
      while (!stop.load()) {
        for (auto& i : idx) {
          x = x * 6364136223846793005ull + 1442695040888963407ull;
          i = static_cast<int64_t>((x >> 33) % n);
        }
        ColumnsOut out;
        out.run_ids = ids.data();
        c->gather_columns(idx.data(), idx.size(), out);
      }
    });
  append(more, f.tmp / "sh", opts(0));
  const auto m = read_manifest(f.tmp / "sh");
  EXPECT_TRUE(c->grow(*m, 2));
  stop = true;
  for (auto& t : gatherers) t.join();
  EXPECT_EQ(c->rows(), m->rows);
  EXPECT_GT(c->layout()->shards(), shards);
  // Every row, old and new, is the dataset's.
  OpenOptions oo;
  oo.workers = 1;
  auto d = Dataset::open(f.tmp / "sh", oo);
  std::vector<int64_t> all(d->rows());
  std::iota(all.begin(), all.end(), 0);
  std::vector<uint32_t> got(all.size()), want(all.size());
  ColumnsOut a, b;
  a.run_ids = got.data();
  b.run_ids = want.data();
  c->gather_columns(all.data(), all.size(), a);
  d->gather_columns(all.data(), all.size(), b, 1);
  EXPECT_EQ(got, want);
  // A manifest whose shards are not this cache's first ones is refused,
  // naming the shard, and the cache stays as it was.
  Manifest changed = *m;
  changed.shards[1].crc32c ^= 1;
  try {
    c->grow(changed, 2);
    ADD_FAILURE() << "a changed shard was taken in";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard 1 is"), std::string::npos) << e.what();
  }
  Manifest fewer = *m;
  fewer.shards.pop_back();
  EXPECT_THROW(c->grow(fewer, 2), Error);
  EXPECT_EQ(c->rows(), m->rows);
}
