// Run digests: the documented SHA-256 of a run's content, the same whichever
// file the game came from; writers that refuse runs the dataset already
// holds or that repeat each other (and write them when allowed); verify's
// report of duplicates; datasets written before digests existed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "base/error.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/digest.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/manifest.hpp"
#include "dataset/metadata.hpp"
#include "dataset/source.hpp"
#include "storage/crypto.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;
using dstest::make_run;
namespace fs = std::filesystem;

namespace {

BuildOptions opts(bool allow_duplicates = false) {
  BuildOptions o;
  o.workers = 2;
  o.allow_duplicates = allow_duplicates;
  return o;
}

// Every file of a folder, by name: what "nothing was changed" compares.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out[e.path().filename()] = dstest::slurp(e.path().string());
  return out;
}

std::vector<run::Run> runs_a() {
  return {make_run(1, 17), make_run(2, 1), make_run(3, 0, 1, nullptr), make_run(4, 300)};
}
std::vector<run::Run> runs_b() { return {make_run(50, 12), make_run(51, 40), make_run(52, 33)}; }

// (id, hex digest, duplicate_of or -1) of every row of run_digests.
std::vector<std::tuple<int64_t, std::string, int64_t>> digest_rows(const std::string& ds) {
  Db db(ds + "/metadata.db", Db::Mode::read_only);
  std::vector<std::tuple<int64_t, std::string, int64_t>> out;
  Stmt q = db.prepare("SELECT id, hex(sha256), duplicate_of FROM run_digests ORDER BY id");
  while (q.step()) out.emplace_back(q.col_int(0), q.col_text(1), q.col_null(2) ? -1 : q.col_int(2));
  return out;
}

void exec(const std::string& ds, const std::string& sql) {
  Db db(ds + "/metadata.db", Db::Mode::read_write);
  db.exec(sql);
}

// A dataset as a2pack wrote it before digests existed: no run_digests
// table, no "run_digests" in the manifest.
void drop_digests(const std::string& ds) {
  exec(ds, "DROP TABLE run_digests");
  Manifest m = *read_manifest(ds);
  m.run_digests = false;
  m.has_metadata_stamp = false;
  const std::string text = to_json(m);
  std::ofstream(ds + "/manifest.json", std::ios::trunc) << text;
  ASSERT_EQ(dstest::slurp(ds + "/manifest.json").find("run_digests"), std::string::npos);
}

std::string upper_hex(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// The digest docs/dataset.md prescribes, from the run itself (not from a
// dataset): built byte by byte here and hashed with OpenSSL in one call.
std::string documented_digest(const run::Run& r) {
  std::string b = "a2pack run digest 1\n";
  auto put = [&](const void* p, size_t n) { b.append(static_cast<const char*>(p), n); };
  const uint64_t n = r.size();
  const int64_t score = static_cast<int64_t>(r.meta.max_score);
  const int64_t tile = r.meta.highest_tile;
  const int64_t start = static_cast<int64_t>(r.meta.start_unix_s);
  const double elapsed = r.meta.elapsed_s;
  const std::string engine = r.meta.engine.value_or("");
  const auto len = static_cast<uint32_t>(engine.size());
  put(&n, 8);
  put(&score, 8);
  put(&tile, 8);
  put(&start, 8);
  put(&elapsed, 8);
  put(&len, 4);
  b += engine;
  for (size_t i = 0; i < r.size(); ++i) {
    put(&r.boards[i], 8);
    put(&r.moves[i], 1);
  }
  return upper_hex(storage::sha256_hex(b));
}

}  // namespace

TEST(DatasetDigests, BuildRecordsTheDocumentedDigestOfEachRun) {
  a2test::TempDir tmp;
  auto a = runs_a();
  dstest::write_runs(tmp / "a", a);
  DirSource src(tmp / "a");
  build(src, tmp / "ds", opts());
  auto rows = digest_rows(tmp / "ds");
  ASSERT_EQ(rows.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::get<0>(rows[i]), static_cast<int64_t>(i));
    EXPECT_EQ(std::get<1>(rows[i]), documented_digest(a[i])) << "run " << i;
    EXPECT_EQ(std::get<2>(rows[i]), -1);
  }
  EXPECT_TRUE(read_manifest(tmp / "ds")->run_digests);
  // Upstream's table is as upstream writes it: the digests are a table of
  // their own.
  Db db(tmp / "ds/metadata.db", Db::Mode::read_only);
  Stmt c = db.prepare("SELECT count(*) FROM pragma_table_info('runs')");
  ASSERT_TRUE(c.step());
  EXPECT_EQ(c.col_int(0), 8);
}

TEST(DatasetDigests, TheSameGameFromV1AndV2FilesHasTheSameDigest) {
  a2test::TempDir tmp;
  // v1 files hold no branch values: the same games without them in v2.
  std::vector<run::Run> games = {make_run(7, 20, 0), make_run(8, 5, 0)};
  fs::create_directories(tmp / "v1");
  for (size_t i = 0; i < games.size(); ++i) {
    const std::string bytes = run::encode_v1(games[i], false);
    write_file_atomic(tmp / ("v1/run-" + std::to_string(i) + ".a2run2"), bytes.data(),
                      bytes.size());
  }
  dstest::write_runs(tmp / "v2", games);
  BuildOptions o = opts();
  o.allow_missing_branches = true;
  DirSource s1(tmp / "v1"), s2(tmp / "v2");
  build(s1, tmp / "ds", o);
  EXPECT_EQ(digest_rows(tmp / "ds")[0], std::make_tuple(int64_t{0}, documented_digest(games[0]),
                                                        int64_t{-1}));
  // The v2 files of the same games are the runs the dataset holds.
  Error e = dstest::error_of([&] { append(s2, tmp / "ds", o); });
  EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT) << e.what();
  EXPECT_NE(std::string(e.what()).find("2 of the 2 runs to append are already in the dataset"),
            std::string::npos)
      << e.what();
}

TEST(DatasetDigests, AnAppendOfRunsTheDatasetHoldsIsRefusedAndChangesNothing) {
  for (bool copy : {false, true}) {
    SCOPED_TRACE(copy ? "copying append" : "in-place append");
    a2test::TempDir tmp;
    dstest::write_runs(tmp / "a", runs_a());
    dstest::write_runs(tmp / "b", runs_b());
    DirSource sa(tmp / "a"), sb(tmp / "b");
    build(sa, tmp / "ds", opts());
    append(sb, tmp / "ds", opts());
    const auto before = snapshot(tmp / "ds");
    BuildOptions o = opts();
    o.copy_steps = copy;
    Error e = dstest::error_of([&] { append(sb, tmp / "ds", o); });
    EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
    const std::string msg = e.what();
    for (const char* needle :
         {"3 of the 3 runs to append are already in the dataset", "run-000000.a2run2 is run 4",
          "run-000002.a2run2 is run 6", "Nothing was changed", "--allow-duplicates"})
      EXPECT_NE(msg.find(needle), std::string::npos) << needle << " in: " << msg;
    EXPECT_EQ(snapshot(tmp / "ds"), before);
    // A mix of new and present runs: still refused, the new one not added.
    dstest::write_runs(tmp / "c", {make_run(60, 9), runs_b()[1]});
    DirSource sc(tmp / "c");
    e = dstest::error_of([&] { append(sc, tmp / "ds", o); });
    EXPECT_NE(std::string(e.what()).find("1 of the 2 runs to append is already in the dataset"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("run-000001.a2run2 is run 5"), std::string::npos);
    EXPECT_EQ(snapshot(tmp / "ds"), before);

    // Allowed: appended, each copy recorded as one, and verify notes them.
    o.allow_duplicates = true;
    BuildResult r = append(sb, tmp / "ds", o);
    EXPECT_EQ(r.runs_added, 3u);
    EXPECT_EQ(r.runs_duplicated, 3u);
    auto rows = digest_rows(tmp / "ds");
    ASSERT_EQ(rows.size(), 10u);
    for (int64_t id = 7; id < 10; ++id) {
      EXPECT_EQ(std::get<2>(rows[id]), id - 3);
      EXPECT_EQ(std::get<1>(rows[id]), std::get<1>(rows[id - 3]));
    }
    VerifyReport v = verify(tmp / "ds", false, 2);
    EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
    EXPECT_EQ(v.duplicate_runs, 3u);
    EXPECT_EQ(v.allowed_duplicates, 3u);
    ASSERT_FALSE(v.notes.empty());
    EXPECT_NE(v.notes.back().find("run 7 repeats run 4"), std::string::npos) << v.notes.back();
  }
}

TEST(DatasetDigests, RunsRepeatedWithinOneBuildOrAppendAreRefused) {
  a2test::TempDir tmp;
  auto a = runs_a();
  dstest::write_runs(tmp / "a", a);
  // The same game under two names, and a third name for another.
  dstest::write_runs(tmp / "twice", {make_run(70, 8), make_run(71, 3), make_run(70, 8)});
  DirSource sa(tmp / "a"), st(tmp / "twice");
  Error e = dstest::error_of([&] { build(st, tmp / "dsx", opts()); });
  EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(e.what()).find("1 of the 3 runs given repeats an earlier run of this "
                                       "input"),
            std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("run-000002.a2run2 repeats " + (tmp / "twice") +
                                       "/run-000000.a2run2"),
            std::string::npos)
      << e.what();
  EXPECT_FALSE(fs::exists(tmp / "dsx"));

  build(sa, tmp / "ds", opts());
  const auto before = snapshot(tmp / "ds");
  e = dstest::error_of([&] { append(st, tmp / "ds", opts()); });
  EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(e.what()).find("1 of the 3 runs to append repeats an earlier run of this "
                                       "append"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(snapshot(tmp / "ds"), before);

  BuildResult r = append(st, tmp / "ds", opts(true));
  EXPECT_EQ(r.runs_duplicated, 1u);
  auto rows = digest_rows(tmp / "ds");
  EXPECT_EQ(std::get<2>(rows.back()), 4);  // the third run repeats the first of this append
  EXPECT_TRUE(verify(tmp / "ds", false, 2).ok);
  r = build(st, tmp / "ds2", opts(true));
  EXPECT_EQ(r.runs_duplicated, 1u);
}

TEST(DatasetDigests, VerifyReportsDuplicatesNotWrittenKnowingly) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "a", runs_a());
  dstest::write_runs(tmp / "b", runs_b());
  DirSource sa(tmp / "a"), sb(tmp / "b");
  build(sa, tmp / "ds", opts());
  append(sb, tmp / "ds", opts());
  append(sb, tmp / "ds", opts(true));
  // As if written by a tool that does not check: the copies are not marked.
  exec(tmp / "ds", "UPDATE run_digests SET duplicate_of = NULL");
  VerifyReport v = verify(tmp / "ds", false, 2);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.status, A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(v.duplicate_runs, 3u);
  EXPECT_EQ(v.allowed_duplicates, 0u);
  ASSERT_EQ(v.duplicates_listed.size(), 3u);
  EXPECT_EQ(v.duplicates_listed[0].id, 7);
  EXPECT_EQ(v.duplicates_listed[0].same_as, 4);
  ASSERT_EQ(v.errors.size(), 1u);
  for (const char* needle : {"3 runs repeat earlier runs of the dataset", "run 7 repeats run 4",
                             "run 9 repeats run 6"})
    EXPECT_NE(v.errors[0].find(needle), std::string::npos) << v.errors[0];
  EXPECT_NE(v.to_json().find("\"duplicates\":{\"allowed\":0,\"listed\":[{\"allowed\":false,"
                             "\"id\":7,\"same_as\":4}"),
            std::string::npos)
      << v.to_json();
  // The filter the message suggests leaves the copies out.
  auto d = Dataset::open(tmp / "ds", OpenOptions());
  EXPECT_EQ(d->select_runs("id NOT IN (SELECT b.id FROM run_digests AS a JOIN run_digests AS b ON "
                           "b.sha256 = a.sha256 AND b.id > a.id)",
                           {}),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(DatasetDigests, AStoredDigestThatDisagreesIsAnErrorThatRepairFixes) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "a", runs_a());
  DirSource sa(tmp / "a");
  build(sa, tmp / "ds", opts());
  const auto good = digest_rows(tmp / "ds");
  exec(tmp / "ds", "UPDATE run_digests SET sha256 = zeroblob(32) WHERE id = 1; "
                   "INSERT INTO run_digests (id, sha256) VALUES (99, zeroblob(32))");
  VerifyReport v = verify(tmp / "ds", false, 2);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.status, A2PACK_E_CORRUPT);
  ASSERT_EQ(v.errors.size(), 1u);
  EXPECT_NE(v.errors[0].find("the stored content digests of 1 runs (run 1) do not match"),
            std::string::npos)
      << v.errors[0];
  v = verify(tmp / "ds", true, 2);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
  std::string actions;
  for (const auto& a : v.actions) actions += a + "\n";
  EXPECT_NE(actions.find("replaced 1 stored run digests"), std::string::npos) << actions;
  EXPECT_NE(actions.find("removed 1 run digests of ids that are no run"), std::string::npos)
      << actions;
  EXPECT_EQ(digest_rows(tmp / "ds"), good);
}

TEST(DatasetDigests, ADatasetWithoutDigestsOpensVerifiesAndGetsThem) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "a", runs_a());
  dstest::write_runs(tmp / "b", runs_b());
  DirSource sa(tmp / "a"), sb(tmp / "b");
  build(sa, tmp / "ds", opts());
  append(sb, tmp / "ds", opts());
  drop_digests(tmp / "ds");
  fs::copy(tmp / "ds", tmp / "ds2");
  fs::copy(tmp / "ds", tmp / "ds3");

  auto d = Dataset::open(tmp / "ds", OpenOptions());
  EXPECT_EQ(d->runs(), 7u);
  d.reset();
  VerifyReport v = verify(tmp / "ds", false, 2);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
  EXPECT_EQ(v.runs_without_digest, 7u);
  ASSERT_FALSE(v.notes.empty());
  EXPECT_NE(v.notes.back().find("7 of the 7 runs have no content digest recorded"),
            std::string::npos)
      << v.notes.back();

  // verify --repair records them.
  v = verify(tmp / "ds", true, 2);
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.runs_without_digest, 0u);
  ASSERT_EQ(v.actions.size(), 1u);
  EXPECT_NE(v.actions[0].find("recorded the content digests of 7 runs"), std::string::npos);
  EXPECT_TRUE(read_manifest(tmp / "ds")->run_digests);
  EXPECT_EQ(digest_rows(tmp / "ds").size(), 7u);
  EXPECT_EQ(std::get<1>(digest_rows(tmp / "ds")[4]), documented_digest(runs_b()[0]));

  // An append records them first, then refuses runs already there...
  Error e = dstest::error_of([&] { append(sb, tmp / "ds2", opts()); });
  EXPECT_NE(std::string(e.what()).find("3 of the 3 runs to append are already in the dataset"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(digest_rows(tmp / "ds2"), digest_rows(tmp / "ds"));
  EXPECT_TRUE(verify(tmp / "ds2", false, 2).ok);
  // ... or adds new ones, saying what it did first.
  dstest::write_runs(tmp / "c", {make_run(80, 11)});
  DirSource sc(tmp / "c");
  std::vector<std::string> notes;
  BuildOptions o = opts();
  o.on_note = [&](const std::string& s) { notes.push_back(s); };
  BuildResult r = append(sc, tmp / "ds3", o);
  EXPECT_EQ(r.digests_recorded, 7u);
  EXPECT_EQ(r.runs_added, 1u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("recorded the content digests of 7 runs that had none"),
            std::string::npos);
  EXPECT_EQ(digest_rows(tmp / "ds3").size(), 8u);
  EXPECT_TRUE(verify(tmp / "ds3", false, 2).ok);
  // The next append has nothing to record.
  dstest::write_runs(tmp / "e", {make_run(81, 2)});
  DirSource se(tmp / "e");
  EXPECT_EQ(append(se, tmp / "ds3", opts()).digests_recorded, 0u);
}

// A writer that knows nothing of digests (an older a2pack) rewrites the
// manifest without "run_digests"; what it may have left in run_digests is
// not trusted: the next append checks every run's digest first.
TEST(DatasetDigests, AfterAWriterThatKnowsNoDigestsAnAppendChecksThemAll) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "a", runs_a());
  DirSource sa(tmp / "a");
  build(sa, tmp / "ds", opts());
  const auto good = digest_rows(tmp / "ds");
  exec(tmp / "ds", "UPDATE run_digests SET sha256 = zeroblob(32) WHERE id = 3");
  Manifest m = *read_manifest(tmp / "ds");
  m.run_digests = false;
  const std::string text = to_json(m);
  std::ofstream(tmp / "ds/manifest.json", std::ios::trunc) << text;
  dstest::write_runs(tmp / "c", {make_run(90, 6)});
  DirSource sc(tmp / "c");
  std::vector<std::string> notes;
  BuildOptions o = opts();
  o.on_note = [&](const std::string& s) { notes.push_back(s); };
  append(sc, tmp / "ds", o);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("replaced 1 stored run digests"), std::string::npos) << notes[0];
  auto rows = digest_rows(tmp / "ds");
  rows.pop_back();
  EXPECT_EQ(rows, good);
  // So run 3's file is known again.
  Error e = dstest::error_of([&] { append(sa, tmp / "ds", opts()); });
  EXPECT_NE(std::string(e.what()).find("4 of the 4 runs to append are already in the dataset"),
            std::string::npos)
      << e.what();
}

TEST(DatasetDigests, ShardedDatasetsRefuseDuplicatesToo) {
  a2test::TempDir tmp;
  // (No run of 0 steps: a sharded build counts such a run in the manifest
  // but in no shard, a separate defect.)
  const std::vector<run::Run> a = {make_run(1, 17), make_run(2, 1), make_run(4, 300)};
  dstest::write_runs(tmp / "a", a);
  dstest::write_runs(tmp / "b", runs_b());
  DirSource sa(tmp / "a"), sb(tmp / "b");
  BuildOptions o = opts();
  o.shard_rows = 64;
  build(sa, tmp / "ds", o);
  append(sb, tmp / "ds", opts());
  const auto before = snapshot(tmp / "ds");
  Error e = dstest::error_of([&] { append(sb, tmp / "ds", opts()); });
  EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(e.what()).find("3 of the 3 runs to append are already in the dataset"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(snapshot(tmp / "ds"), before);
  EXPECT_EQ(append(sb, tmp / "ds", opts(true)).runs_duplicated, 3u);
  VerifyReport v = verify(tmp / "ds", false, 2);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
  EXPECT_EQ(v.allowed_duplicates, 3u);
  // Without digests (written before they existed), repair computes them
  // from the shards.
  drop_digests(tmp / "ds");
  v = verify(tmp / "ds", true, 2);
  EXPECT_NE(v.actions.at(0).find("recorded the content digests of 9 runs"), std::string::npos);
  EXPECT_EQ(std::get<1>(digest_rows(tmp / "ds")[2]), documented_digest(a[2]));
  // The copies are no longer marked as written knowingly.
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.duplicate_runs, 3u);
}

TEST(DatasetDigests, AnInterruptedAppendTakesItsDigestsBackWithItsRuns) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "a", runs_a());
  dstest::write_runs(tmp / "b", runs_b());
  DirSource sa(tmp / "a"), sb(tmp / "b");
  build(sa, tmp / "ds", opts());
  ASSERT_EQ(dstest::run_child("append:db-committed", [&] { append(sb, tmp / "ds", opts()); }),
            kCrashExitCode);
  EXPECT_EQ(digest_rows(tmp / "ds").size(), 7u);  // committed to SQLite, not to the dataset
  RecoverOptions ro;
  recover(tmp / "ds", ro);
  EXPECT_EQ(digest_rows(tmp / "ds").size(), 4u);
  // So the same runs append afterwards.
  EXPECT_EQ(append(sb, tmp / "ds", opts()).runs_added, 3u);
  EXPECT_TRUE(verify(tmp / "ds", false, 2).ok);
}
