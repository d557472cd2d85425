// Building, appending, opening, gathering and selecting, against runs made
// here; and every kind of bad dataset folder.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/journal.hpp"
#include "dataset/metadata.hpp"
#include "dataset/npy.hpp"
#include "dataset/row.hpp"
#include "dataset/source.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;
using dstest::make_run;
namespace fs = std::filesystem;

namespace {

struct Fixture {
  a2test::TempDir tmp;
  std::vector<run::Run> runs;
  std::string runs_dir = tmp / "runs";
  std::string ds = tmp / "ds";
};

BuildOptions opts(uint32_t workers = 2, bool allow = false) {
  BuildOptions o;
  o.workers = workers;
  o.allow_missing_branches = allow;
  return o;
}

std::unique_ptr<Dataset> open_ds(const std::string& dir, bool mmap = false) {
  OpenOptions o;
  o.mmap = mmap;
  o.workers = 2;
  return Dataset::open(dir, o);
}

void expect_error(const std::function<void()>& f, a2pack_status st,
                  std::initializer_list<const char*> needles) {
  Error e = dstest::error_of(f);
  EXPECT_EQ(e.status(), st) << e.what();
  for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
}

// Runs with branches of assorted lengths, one of them empty.
std::vector<run::Run> standard_runs() {
  std::vector<run::Run> v;
  size_t lens[] = {17, 1, 0, 300, 45};
  for (size_t i = 0; i < 5; ++i) v.push_back(make_run(i + 1, lens[i], 1, i == 2 ? nullptr : "eng"));
  return v;
}

void check_rows_against(const Dataset& d, const std::vector<run::Run>& runs, uint32_t first_id,
                        uint64_t first_row) {
  uint64_t row = first_row;
  for (size_t r = 0; r < runs.size(); ++r)
    for (size_t s = 0; s < runs[r].size(); ++s, ++row)
      dstest::expect_row(d.data() + row * 32,
                         dstest::expected_row(runs[r], s, first_id + static_cast<uint32_t>(r)),
                         "run " + std::to_string(r) + " step " + std::to_string(s));
}

}  // namespace

TEST(DatasetBuild, RowsAndMetadataMatchTheRunsFieldByField) {
  Fixture f;
  f.runs = standard_runs();
  // The real upstream run joins as the last run.
  auto fx = a2test::fixture_bytes();
  f.runs.push_back(run::decode(fx.data(), fx.size()));
  dstest::write_runs(f.runs_dir, f.runs);
  DirSource src(f.runs_dir);
  ASSERT_EQ(src.count(), 6u);
  BuildResult r = build(src, f.ds, opts());
  uint64_t total = 0;
  for (auto& x : f.runs) total += x.size();
  EXPECT_EQ(r.runs_added, 6u);
  EXPECT_EQ(r.rows_added, total);

  auto d = open_ds(f.ds);
  ASSERT_EQ(d->rows(), total);
  EXPECT_EQ(d->runs(), 6u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d->data()) % 64, 0u);
  check_rows_against(*d, f.runs, 0, 0);
  EXPECT_TRUE(d->check_rows(2, 10).empty());
  EXPECT_TRUE(d->notes().empty());

  // The upstream run: every step has branches, so every chosen move that is
  // legal has exactly 1.0.
  uint64_t fx_first = total - f.runs.back().size();
  for (uint64_t i = fx_first; i < total; ++i) {
    const uint8_t* row = d->data() + i * 32;
    if (row[9] >> row[8] & 1) {
      float v;
      std::memcpy(&v, row + 10 + 4 * row[8], 4);
      EXPECT_EQ(v, 1.0f);
    }
  }

  Db db(f.ds + "/metadata.db", Db::Mode::read_only);
  Stmt q = db.prepare(
      "SELECT id, first_step_idx, num_steps, max_score, highest_tile, engine, start_time, "
      "elapsed_s FROM runs ORDER BY id");
  uint64_t first = 0;
  for (size_t i = 0; i < f.runs.size(); ++i) {
    ASSERT_TRUE(q.step());
    const auto& m = f.runs[i].meta;
    EXPECT_EQ(q.col_int(0), static_cast<int64_t>(i));
    EXPECT_EQ(q.col_int(1), static_cast<int64_t>(first));
    EXPECT_EQ(q.col_int(2), static_cast<int64_t>(f.runs[i].size()));
    EXPECT_EQ(q.col_int(3), static_cast<int64_t>(m.max_score));
    EXPECT_EQ(q.col_int(4), static_cast<int64_t>(m.highest_tile));
    // A run without an engine is stored as '', as upstream stores it.
    EXPECT_FALSE(q.col_null(5));
    EXPECT_EQ(q.col_text(5), m.engine ? *m.engine : std::string());
    EXPECT_EQ(q.col_int(6), static_cast<int64_t>(m.start_unix_s));
    EXPECT_EQ(q.col_double(7), static_cast<double>(m.elapsed_s));
    first += f.runs[i].size();
  }
  EXPECT_FALSE(q.step());

  // The manifest records the counts and the CRC of the data bytes.
  auto man = read_manifest(f.ds);
  ASSERT_TRUE(man);
  EXPECT_EQ(man->rows, total);
  EXPECT_EQ(man->runs, 6u);
  EXPECT_EQ(man->next_run_id, 6u);
  auto bytes = a2test::read_bytes(f.ds + "/steps.npy");
  ASSERT_EQ(bytes.size(), 256 + 32 * total);
  EXPECT_EQ(man->steps_crc32c, crc32c::compute(bytes.data() + 256, 32 * total));
  ASSERT_EQ(man->sources.size(), 1u);
  EXPECT_EQ(man->sources[0].input, f.runs_dir);
  EXPECT_EQ(man->sources[0].kind, "dir");
}

TEST(DatasetBuild, SameBytesWhateverTheWorkerCount) {
  Fixture f;
  std::vector<run::Run> runs;
  for (int i = 0; i < 600; ++i) runs.push_back(make_run(100 + i, 3 + i % 7));  // > one chunk
  dstest::write_runs(f.runs_dir, runs);
  DirSource src(f.runs_dir);
  build(src, f.tmp / "a", opts(1));
  build(src, f.tmp / "b", opts(4));
  EXPECT_EQ(dstest::slurp(f.tmp / "a/steps.npy"), dstest::slurp(f.tmp / "b/steps.npy"));
  auto d = open_ds(f.tmp / "a");
  check_rows_against(*d, runs, 0, 0);
}

TEST(DatasetBuild, RunsWithoutBranchesNeedTheFlag) {
  Fixture f;
  f.runs = {make_run(1, 5), make_run(2, 6, 0), make_run(3, 7, 2)};
  dstest::write_runs(f.runs_dir, f.runs);
  DirSource src(f.runs_dir);
  expect_error([&] { build(src, f.ds, opts()); }, A2PACK_E_INVALID_ARGUMENT,
               {"run-000001.a2run2", "step 0", "--allow-missing-branches"});
  EXPECT_FALSE(fs::exists(f.ds));
  for (const auto& e : fs::directory_iterator(f.tmp.path()))  // no temporary folder left
    EXPECT_EQ(e.path().filename().string().find("ds.tmp-"), std::string::npos);
  build(src, f.ds, opts(2, true));
  auto d = open_ds(f.ds);
  check_rows_against(*d, f.runs, 0, 0);
  EXPECT_TRUE(d->check_rows(1, 10).empty());
}

TEST(DatasetBuild, RefusesOverlongRunsAndBadInput) {
  Fixture f;
  dstest::write_runs(f.runs_dir, {make_run(1, 65537)});
  DirSource src(f.runs_dir);
  expect_error([&] { build(src, f.ds, opts()); }, A2PACK_E_UNSUPPORTED,
               {"run-000000.a2run2", "65537 steps", "u16"});
  // Exactly 65536 steps fit.
  dstest::write_runs(f.tmp / "ok", {make_run(1, 65536)});
  DirSource ok(f.tmp / "ok");
  EXPECT_EQ(build(ok, f.ds, opts()).rows_added, 65536u);

  // A damaged run file names itself.
  std::string bad = f.tmp / "bad";
  dstest::write_runs(bad, {make_run(1, 5), make_run(2, 5)});
  a2test::write_bytes(bad + "/run-000001.a2run2", "\x05\x01", 2);
  DirSource bs(bad);
  expect_error([&] { build(bs, f.tmp / "ds2", opts()); }, A2PACK_E_CORRUPT, {"run-000001.a2run2"});
  expect_error([&] { DirSource s(f.tmp / "missing"); }, A2PACK_E_NOT_FOUND, {"missing"});
  fs::create_directories(f.tmp / "empty");
  expect_error([&] { DirSource s(f.tmp / "empty"); }, A2PACK_E_NOT_FOUND, {"no .a2run2 files"});
  expect_error([&] { open_source(f.tmp / "bad/run-000000.a2run2"); }, A2PACK_E_UNSUPPORTED,
               {"not a folder"});
}

TEST(DatasetBuild, ReplacesOnlyWithOverwriteAndOnlyADataset) {
  Fixture f;
  dstest::write_runs(f.runs_dir, {make_run(1, 5)});
  dstest::write_runs(f.tmp / "r2", {make_run(2, 9), make_run(3, 1)});
  DirSource s1(f.runs_dir), s2(f.tmp / "r2");
  build(s1, f.ds, opts());
  expect_error([&] { build(s2, f.ds, opts()); }, A2PACK_E_INVALID_ARGUMENT, {"already exists", "--overwrite"});
  BuildOptions o = opts();
  o.overwrite = true;
  build(s2, f.ds, o);
  auto d = open_ds(f.ds);
  EXPECT_EQ(d->rows(), 10u);
  EXPECT_EQ(d->runs(), 2u);
  // Nothing left beside it.
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(f.tmp.path())) names.insert(e.path().filename());
  EXPECT_EQ(names, (std::set<std::string>{"ds", "r2", "runs"}));
  // A folder that is not a dataset is never replaced.
  fs::create_directories(f.tmp / "home");
  a2test::write_bytes(f.tmp / "home/notes.txt", "x", 1);
  expect_error([&] { build(s1, f.tmp / "home", o); }, A2PACK_E_INVALID_ARGUMENT,
               {"does not look like a dataset", "notes.txt"});
  EXPECT_TRUE(fs::exists(f.tmp / "home/notes.txt"));
  // Dataset folders get ordinary permissions.
  struct stat st;
  ASSERT_EQ(::stat(f.ds.c_str(), &st), 0);
  EXPECT_TRUE(st.st_mode & S_IRGRP);
}

TEST(DatasetAppend, AddsRunsWithFreshIdsAndVerifies) {
  Fixture f;
  auto a = standard_runs();
  std::vector<run::Run> b = {make_run(50, 12), make_run(51, 0), make_run(52, 33)};
  dstest::write_runs(f.runs_dir, a);
  dstest::write_runs(f.tmp / "more", b);
  DirSource sa(f.runs_dir), sb(f.tmp / "more");
  build(sa, f.ds, opts());
  uint64_t rows_a = open_ds(f.ds)->rows();
  BuildResult r = append(sb, f.ds, opts());
  EXPECT_EQ(r.runs_added, 3u);
  EXPECT_EQ(r.rows_added, 45u);
  EXPECT_EQ(r.total_runs, 8u);
  EXPECT_EQ(r.total_rows, rows_a + 45);
  auto d = open_ds(f.ds);
  check_rows_against(*d, a, 0, 0);
  check_rows_against(*d, b, 5, rows_a);
  EXPECT_TRUE(d->check_rows(2, 10).empty());
  auto v = verify(f.ds, false, 2);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
  EXPECT_EQ(v.rows, rows_a + 45);
  // first_step_idx continues after the old rows.
  EXPECT_EQ(expand(d->select("id = 5", {})).front(), static_cast<int64_t>(rows_a));
  auto man = read_manifest(f.ds);
  ASSERT_EQ(man->sources.size(), 2u);
  EXPECT_EQ(man->sources[1].first_run_id, 5u);
  // Only the dataset's three files.
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(f.ds)) names.insert(e.path().filename());
  EXPECT_EQ(names, (std::set<std::string>{"manifest.json", "metadata.db", "steps.npy"}));
  expect_error([&] { append(sb, f.tmp / "nope", opts()); }, A2PACK_E_NOT_FOUND, {"nope"});
}

// A reader keeps its metadata.db connection after opening; an append made
// meanwhile adds runs whose rows the reader never loaded. Its selections must
// keep to the runs it opened with (found by make soak: "run N covers rows
// outside the rows of steps.npy" from readers opened before an append).
TEST(DatasetAppend, OpenReadersKeepTheRunsTheyLoaded) {
  Fixture f;
  auto a = standard_runs();
  std::vector<run::Run> b = {make_run(50, 12), make_run(52, 33)};
  dstest::write_runs(f.runs_dir, a);
  dstest::write_runs(f.tmp / "more", b);
  DirSource sa(f.runs_dir), sb(f.tmp / "more");
  build(sa, f.ds, opts());
  auto before = open_ds(f.ds);
  const uint64_t rows = before->rows(), runs = before->runs();
  append(sb, f.ds, opts());
  EXPECT_EQ(total_rows(before->select("", {})), rows);
  EXPECT_EQ(before->select_runs("", {}).size(), runs);
  EXPECT_TRUE(before->select("id >= 5", {}).empty());
  auto after = open_ds(f.ds);
  EXPECT_EQ(after->runs(), runs + 2);
  EXPECT_EQ(total_rows(after->select("", {})), rows + 45);
}

TEST(DatasetOpen, GathersRowsAndColumns) {
  Fixture f;
  f.runs = standard_runs();
  dstest::write_runs(f.runs_dir, f.runs);
  DirSource src(f.runs_dir);
  build(src, f.ds, opts());
  auto d = open_ds(f.ds);
  auto m = open_ds(f.ds, /*mmap=*/true);
  EXPECT_TRUE(m->mapped());
  ASSERT_EQ(std::memcmp(d->data(), m->data(), d->rows() * 32), 0);

  std::vector<int64_t> idx;
  for (int i = 0; i < 5000; ++i) idx.push_back((i * 7919) % static_cast<int64_t>(d->rows()));
  std::vector<uint8_t> one(idx.size() * 32), two(idx.size() * 32), mm(idx.size() * 32);
  d->gather(idx.data(), idx.size(), one.data(), 1);
  d->gather(idx.data(), idx.size(), two.data(), 2);
  m->gather(idx.data(), idx.size(), mm.data(), 0);
  for (size_t i = 0; i < idx.size(); ++i)
    ASSERT_EQ(std::memcmp(one.data() + 32 * i, d->data() + 32 * idx[i], 32), 0) << i;
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, mm);

  size_t n = idx.size();
  std::vector<uint8_t> exps(16 * n), moves(n), legal(4 * n), mask(n);
  std::vector<uint64_t> boards(n);
  std::vector<float> ev(4 * n);
  std::vector<uint32_t> rid(n);
  std::vector<uint16_t> sidx(n);
  ColumnsOut c{exps.data(), boards.data(), moves.data(), legal.data(), mask.data(), ev.data(), rid.data(), sidx.data()};
  d->gather_columns(idx.data(), n, c, 2);
  for (size_t i = 0; i < n; ++i) {
    Row r;
    std::memcpy(&r, d->data() + 32 * idx[i], 32);
    ASSERT_EQ(boards[i], r.board);
    for (unsigned k = 0; k < 16; ++k)
      ASSERT_EQ(exps[16 * i + k], (r.board >> (60 - 4 * k)) & 0xF) << i << " cell " << k;
    ASSERT_EQ(moves[i], r.move);
    ASSERT_EQ(mask[i], r.ev_legal);
    for (unsigned k = 0; k < 4; ++k) {
      ASSERT_EQ(legal[4 * i + k], r.ev_legal >> k & 1);
      float v;
      std::memcpy(&v, reinterpret_cast<const uint8_t*>(&r) + 10 + 4 * k, 4);
      ASSERT_EQ(ev[4 * i + k], v);
    }
    ASSERT_EQ(rid[i], uint32_t{r.run_id});
    ASSERT_EQ(sidx[i], uint16_t{r.step_index});
  }
  // Only some columns.
  std::vector<uint8_t> moves2(n);
  ColumnsOut only;
  only.moves = moves2.data();
  d->gather_columns(idx.data(), n, only, 1);
  EXPECT_EQ(moves, moves2);

  // Bounds: a status, and nothing written.
  std::vector<int64_t> bad = {0, 1, static_cast<int64_t>(d->rows()), 2};
  std::vector<uint8_t> out(4 * 32, 0xAB);
  expect_error([&] { d->gather(bad.data(), 4, out.data(), 1); }, A2PACK_E_OUT_OF_RANGE,
               {"position 2", std::to_string(d->rows()).c_str()});
  EXPECT_EQ(out[0], 0xAB);
  bad[2] = -1;
  expect_error([&] { d->gather_columns(bad.data(), 4, c, 1); }, A2PACK_E_OUT_OF_RANGE, {"index -1"});
  d->gather(nullptr, 0, nullptr, 1);  // an empty batch is fine
}

TEST(DatasetSelect, FiltersSplitsAndRefusesBadSql) {
  Fixture f;
  std::vector<run::Run> runs;
  for (int i = 0; i < 40; ++i) runs.push_back(make_run(i, 5 + i % 3, 1, i % 2 ? "odd" : "even"));
  dstest::write_runs(f.runs_dir, runs);
  DirSource src(f.runs_dir);
  build(src, f.ds, opts());
  auto d = open_ds(f.ds);

  // max_score = 1000 + 100 * seed.
  std::vector<SqlParam> p(2);
  p[0].type = p[1].type = SqlParam::integer;
  p[0].i = 1500;
  p[1].i = 1900;
  auto sel = expand(d->select("max_score BETWEEN ? AND ?", p));
  std::vector<int64_t> want;
  uint64_t row = 0;
  for (int i = 0; i < 40; ++i) {
    for (size_t s = 0; s < runs[i].size(); ++s, ++row)
      if (i >= 5 && i <= 9) want.push_back(static_cast<int64_t>(row));
  }
  EXPECT_EQ(sel, want);
  for (auto i : sel) {
    uint32_t rid;
    std::memcpy(&rid, d->data() + 32 * i + 26, 4);
    EXPECT_GE(rid, 5u);
    EXPECT_LE(rid, 9u);
  }
  SqlParam t;
  t.type = SqlParam::text;
  t.s = "odd";
  EXPECT_EQ(d->select_runs("engine = ?", {t}).size(), 20u);
  EXPECT_EQ(total_rows(d->select("", {})), d->rows());
  EXPECT_TRUE(d->select("num_steps > 1000", {}).empty());

  // Split: run-disjoint, complete, deterministic, stable under seeds.
  auto sp = d->split("", {}, 0.25, 7, "", {});
  auto tr = expand(sp.train), va = expand(sp.val);
  EXPECT_EQ(tr.size() + va.size(), d->rows());
  std::set<uint32_t> tr_runs, va_runs;
  for (auto i : tr) tr_runs.insert(d->data()[32 * i + 26]);
  for (auto i : va) va_runs.insert(d->data()[32 * i + 26]);
  for (auto r : va_runs) EXPECT_FALSE(tr_runs.count(r)) << r;
  EXPECT_FALSE(va_runs.empty());
  EXPECT_FALSE(tr_runs.empty());
  auto sp2 = d->split("", {}, 0.25, 7, "", {});
  EXPECT_EQ(expand(sp2.val), va);
  // By SQL, within a selection.
  auto sq = d->split("engine = ?", {t}, 0, 0, "id >= ?", {[] { SqlParam q; q.type = SqlParam::integer; q.i = 30; return q; }()});
  std::set<uint32_t> vr;
  for (auto i : expand(sq.val)) vr.insert(d->data()[32 * i + 26]);
  EXPECT_EQ(vr, (std::set<uint32_t>{31, 33, 35, 37, 39}));
  EXPECT_EQ(sq.train.size(), 15u);
  expect_error([&] { d->split("", {}, 1.5, 0, "", {}); }, A2PACK_E_INVALID_ARGUMENT, {"1.5"});

  expect_error([&] { d->select("no_such_column > 1", {}); }, A2PACK_E_INVALID_ARGUMENT,
               {"metadata.db", "no such column"});
  expect_error([&] { d->select("max_score > ?", {}); }, A2PACK_E_INVALID_ARGUMENT, {"1 parameters, 0 given"});
  expect_error([&] { d->select("1); DROP TABLE runs; --", {}); }, A2PACK_E_INVALID_ARGUMENT, {"metadata.db"});
  expect_error([&] { d->select("max_score >", {}); }, A2PACK_E_INVALID_ARGUMENT, {"SQL error"});
  EXPECT_EQ(d->runs(), 40u);
  EXPECT_EQ(total_rows(d->select("", {})), d->rows());  // still there
}

TEST(DatasetOpen, RefusesBadFoldersWithClearErrors) {
  Fixture f;
  f.runs = standard_runs();
  dstest::write_runs(f.runs_dir, f.runs);
  DirSource src(f.runs_dir);
  build(src, f.ds, opts());
  const std::string steps = f.ds + "/steps.npy", db = f.ds + "/metadata.db", man = f.ds + "/manifest.json";
  const std::string steps_bytes = dstest::slurp(steps), man_text = dstest::slurp(man);
  auto restore = [&] {
    a2test::write_bytes(steps, steps_bytes.data(), steps_bytes.size());
    a2test::write_bytes(man, man_text.data(), man_text.size());
  };

  // Extra file: refused unless allowed.
  a2test::write_bytes(f.ds + "/notes.txt", "x", 1);
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_CORRUPT, {"notes.txt", "unexpected file"});
  OpenOptions allow;
  allow.allow_extra_files = true;
  EXPECT_NO_THROW(Dataset::open(f.ds, allow));
  fs::remove(f.ds + "/notes.txt");

  // Missing files.
  fs::rename(steps, f.tmp / "s");
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_NOT_FOUND, {"steps.npy", "missing"});
  fs::rename(f.tmp / "s", steps);
  fs::rename(db, f.tmp / "d");
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_NOT_FOUND, {"metadata.db", "missing"});
  fs::rename(f.tmp / "d", db);
  expect_error([&] { open_ds(f.tmp / "nothing"); }, A2PACK_E_NOT_FOUND, {"nothing"});

  // Truncated steps.npy.
  a2test::write_bytes(steps, steps_bytes.data(), steps_bytes.size() - 7);
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_CORRUPT, {"steps.npy", "truncated"});
  restore();

  // A flipped bit in the rows: CRC mismatch (and accepted when told not to check).
  std::string flipped = steps_bytes;
  flipped[256 + 40] ^= 1;
  a2test::write_bytes(steps, flipped.data(), flipped.size());
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_CHECKSUM, {"steps.npy", "CRC32C", "manifest.json"});
  expect_error([&] { open_ds(f.ds, true); }, A2PACK_E_CHECKSUM, {"CRC32C"});
  OpenOptions nocrc;
  nocrc.verify_crc = false;
  EXPECT_NO_THROW(Dataset::open(f.ds, nocrc));
  auto v = verify(f.ds, false, 1);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.status, A2PACK_E_CHECKSUM);
  restore();

  // Wrong dtype: same size rows with a float64 field.
  std::string wrong = steps_bytes;
  size_t at = wrong.find("'<f4'");
  wrong.replace(at, 5, "'<i4'");
  a2test::write_bytes(steps, wrong.data(), wrong.size());
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_UNSUPPORTED, {"steps.npy", "'ev_values' has type '<i4'"});
  restore();

  // Manifest disagreeing with steps.npy.
  std::string m2 = man_text;
  std::string rows_key = "\"rows\": " + std::to_string(f.runs[0].size() + 1 + 300 + 45);
  ASSERT_NE(m2.find(rows_key), std::string::npos);
  m2.replace(m2.find(rows_key), rows_key.size(), "\"rows\": 999999");
  a2test::write_bytes(man, m2.data(), m2.size());
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_CORRUPT, {"steps.npy", "manifest.json records 999999"});
  restore();
  a2test::write_bytes(man, "{", 1);
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_CORRUPT, {"manifest.json", "JSON"});
  restore();

  // Metadata disagreeing: a run deleted, then run lengths changed.
  {
    Db w(db, Db::Mode::read_write);
    w.exec("DELETE FROM runs WHERE id = 4");
  }
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_CORRUPT, {"metadata.db", "4 committed runs", "records 5"});
  {
    Db w(db, Db::Mode::read_write);
    w.exec("INSERT INTO runs VALUES (4, 318, 46, 0, 0, NULL, 0, 0)");
  }
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_CORRUPT, {"row counts disagree", "363 committed rows", "364"});
}

TEST(DatasetOpen, VerifyFindsRowsThatDisagreeWithTheirRuns) {
  Fixture f;
  f.runs = standard_runs();
  dstest::write_runs(f.runs_dir, f.runs);
  DirSource src(f.runs_dir);
  build(src, f.ds, opts());
  {
    Db w(f.ds + "/metadata.db", Db::Mode::read_write);
    w.exec("UPDATE runs SET first_step_idx = first_step_idx + 1 WHERE id = 3");
  }
  auto v = verify(f.ds, false, 2);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.status, A2PACK_E_CORRUPT);
  ASSERT_FALSE(v.errors.empty());
  std::string all;
  for (auto& e : v.errors) all += e + "\n";
  // Open checks each run's first row, so verify names the run before any
  // row-level pass.
  EXPECT_NE(all.find("run 3 has first_step_idx 19, but row 19 of steps.npy is step 1"),
            std::string::npos) << all;
}

TEST(DatasetOpen, SchemaProblemsNameTheFile) {
  Fixture f;
  dstest::write_runs(f.runs_dir, {make_run(1, 5)});
  DirSource src(f.runs_dir);
  build(src, f.ds, opts());
  {
    Db w(f.ds + "/metadata.db", Db::Mode::read_write);
    w.exec("ALTER TABLE runs RENAME COLUMN max_score TO score");
  }
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_CORRUPT, {"metadata.db", "no column `max_score`"});
  a2test::write_bytes(f.ds + "/metadata.db", "not a database at all, just some text here", 42);
  expect_error([&] { open_ds(f.ds); }, A2PACK_E_CORRUPT, {"metadata.db"});
}

TEST(DatasetUpstream, OpensWithoutManifestAndAppendAdoptsIt) {
  // What upstream's builder writes: npyz header ('|u1', no growth padding),
  // metadata with "" engines, no manifest.
  Fixture f;
  auto runs = standard_runs();
  fs::create_directories(f.ds);
  uint64_t n = 0;
  for (auto& r : runs) n += r.size();
  std::string dict = "{'descr': [('board', '<u8'), ('move', '|u1'), ('ev_legal', '|u1'), "
                     "('ev_values', '<f4', (4,)), ('run_id', '<u4'), ('step_index', '<u2')], "
                     "'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
  std::string body = dict;
  while ((10 + body.size() + 1) % 16) body.push_back(' ');
  if ((10 + body.size() + 1) % 64 == 0) body.append(16, ' ');  // 16-aligned, not 64
  body.push_back('\n');
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file.push_back(static_cast<char>(body.size()));
  file.push_back(0);
  file += body;
  size_t hdr = file.size();
  ASSERT_NE(hdr % 64, 0u);
  {
    Db db(f.ds + "/metadata.db", Db::Mode::create);
    create_schema(db);
    uint64_t first = 0;
    for (size_t r = 0; r < runs.size(); ++r) {
      for (size_t s = 0; s < runs[r].size(); ++s) {
        Row row;
        make_row(row, runs[r].boards[s], runs[r].moves[s], &runs[r].values[4 * s], runs[r].legal[s],
                 true, static_cast<uint32_t>(r), static_cast<uint16_t>(s));
        file.append(reinterpret_cast<const char*>(&row), 32);
      }
      RunRow rr;
      rr.id = static_cast<int64_t>(r);
      rr.first_step_idx = static_cast<int64_t>(first);
      rr.num_steps = static_cast<int64_t>(runs[r].size());
      rr.engine = "";
      insert_runs(db, {rr});
      first += runs[r].size();
    }
  }
  a2test::write_bytes(f.ds + "/steps.npy", file.data(), file.size());
  auto d = open_ds(f.ds);
  EXPECT_EQ(d->rows(), n);
  EXPECT_FALSE(d->manifest());
  ASSERT_EQ(d->notes().size(), 1u);
  EXPECT_NE(d->notes()[0].find("manifest.json: absent"), std::string::npos);
  check_rows_against(*d, runs, 0, 0);
  EXPECT_TRUE(verify(f.ds, false, 1).ok);
  d.reset();

  dstest::write_runs(f.runs_dir, {make_run(70, 4)});
  DirSource src(f.runs_dir);
  append(src, f.ds, opts());
  d = open_ds(f.ds);
  ASSERT_TRUE(d->manifest());
  EXPECT_EQ(d->rows(), n + 4);
  EXPECT_EQ(d->runs(), 6u);
  check_rows_against(*d, runs, 0, 0);
  check_rows_against(*d, {make_run(70, 4)}, 5, n);
  EXPECT_EQ(d->manifest()->sources.size(), 2u);
  EXPECT_EQ(d->manifest()->sources[0].kind, "existing");
  EXPECT_TRUE(verify(f.ds, false, 1).ok);
}

TEST(DatasetRecover, IgnoresThenRemovesAnUncommittedTail) {
  // The state a crash between "rename steps" and "write manifest" leaves:
  // extra rows, extra runs, a temporary file, and the append's journal (only
  // the journal makes them a2pack's own uncommitted append; without it they
  // are another tool's, test_dataset_foreign.cpp).
  Fixture f;
  dstest::write_runs(f.runs_dir, standard_runs());
  dstest::write_runs(f.tmp / "more", {make_run(9, 10)});
  DirSource src(f.runs_dir), more(f.tmp / "more");
  build(src, f.ds, opts());
  std::string man = dstest::slurp(f.ds + "/manifest.json");
  auto before = open_ds(f.ds);
  std::vector<uint8_t> old_rows(before->data(), before->data() + before->rows() * 32);
  before.reset();
  append(more, f.ds, opts());
  a2test::write_bytes(f.ds + "/manifest.json", man.data(), man.size());  // the old commit record
  a2test::write_bytes(f.ds + "/steps.npy.tmp-1-1", "junk", 4);
  {
    Manifest m = parse_manifest(man, "manifest.json");
    Journal j = Journal::starting_from(m, 1);
    struct stat st;
    ASSERT_EQ(::stat((f.ds + "/steps.npy").c_str(), &st), 0);
    j.steps_dev = st.st_dev;
    j.steps_ino = st.st_ino;
    write_journal(f.ds, j);
  }

  auto d = open_ds(f.ds);
  EXPECT_EQ(d->rows() * 32, old_rows.size());
  EXPECT_EQ(d->uncommitted_rows(), 10u);
  EXPECT_EQ(d->runs(), 5u);
  EXPECT_EQ(std::memcmp(d->data(), old_rows.data(), old_rows.size()), 0);
  EXPECT_EQ(d->select_runs("", {}).size(), 5u);  // the temp view hides run 5
  EXPECT_EQ(d->notes().size(), 2u);  // the temporary file; the interrupted append
  d.reset();
  auto v = verify(f.ds, false, 1);
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.notes.size(), 2u);

  auto rep = recover(f.ds, RecoverOptions{});
  EXPECT_EQ(rep.actions.size(), 4u);  // temporary file, runs, rows, journal
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(f.ds)) names.insert(e.path().filename());
  EXPECT_EQ(names, (std::set<std::string>{"manifest.json", "metadata.db", "steps.npy"}));
  d = open_ds(f.ds);
  EXPECT_EQ(d->uncommitted_rows(), 0u);
  EXPECT_TRUE(d->notes().empty());
  EXPECT_EQ(fs::file_size(f.ds + "/steps.npy"), 256 + old_rows.size());
}
