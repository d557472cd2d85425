// Datasets that another tool appended to (a2pack must never take upstream's
// rows for an interrupted append of its own and delete them). Upstream's
// `dataset append` is reproduced here from its documented behaviour: it
// rewrites steps.npy with every old row (its header says how many) plus the
// new rows, whose run_id is the run's position in the batch (0, 1, ...), and
// inserts runs with id = MAX(id) + 1 + position and first_step_idx after the
// old rows, one autocommit INSERT each; it never touches manifest.json.
// a2pack must keep those rows: include them when reading, adopt them into
// the manifest (with a warning) when it appends, and recognise its own
// interrupted append only by its journal.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/metadata.hpp"
#include "dataset/npy.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;
using dstest::make_run;
namespace fs = std::filesystem;

namespace {

BuildOptions one(std::vector<std::string>* warnings = nullptr) {
  BuildOptions o;
  o.workers = 1;
  if (warnings) o.on_warning = [warnings](const std::string& w) { warnings->push_back(w); };
  return o;
}

std::unique_ptr<Dataset> open_ds(const std::string& dir) {
  OpenOptions o;
  o.workers = 1;
  return Dataset::open(dir, o);
}

// An NPY header the way a writer other than numpy may lay it out: no spare
// room, padded to 16 bytes.
std::string other_npy_header(uint64_t rows) {
  std::string dict =
      "{'descr': [('board', '<u8'), ('move', 'u1'), ('ev_legal', 'u1'), ('ev_values', '<f4', "
      "(4,)), ('run_id', '<u4'), ('step_index', '<u2')], 'fortran_order': False, 'shape': (" +
      std::to_string(rows) + ",), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((16 - total % 16) % 16, ' ');
  dict += '\n';
  std::string h = "\x93NUMPY";
  h += '\x01';
  h += '\x00';
  uint16_t len = static_cast<uint16_t>(dict.size());
  h.append(reinterpret_cast<const char*>(&len), 2);
  return h + dict;
}

// What upstream's `dataset append` does to a dataset folder.
void upstream_append(const std::string& dir, const std::vector<run::Run>& runs) {
  ReadFd f(dir + "/steps.npy");
  // npyz's NpyFile::into_vec reads the rows the header declares and ignores
  // bytes past them (such as the tail of an interrupted in-place append).
  NpyInfo info = read_npy_info(f, /*allow_tail=*/true);
  std::string rows(info.rows * 32, '\0');
  if (!rows.empty()) f.pread_exact(rows.data(), rows.size(), info.data_offset);
  uint64_t new_rows = 0;
  for (size_t k = 0; k < runs.size(); ++k)
    for (size_t s = 0; s < runs[k].size(); ++s, ++new_rows) {
      auto e = dstest::expected_row(runs[k], s, static_cast<uint32_t>(k));  // run-local id
      char row[32];
      std::memcpy(row, &e.board, 8);
      row[8] = static_cast<char>(e.move);
      row[9] = static_cast<char>(e.legal);
      std::memcpy(row + 10, e.ev, 16);
      std::memcpy(row + 26, &e.run_id, 4);
      std::memcpy(row + 30, &e.step_index, 2);
      rows.append(row, 32);
    }
  std::string file = other_npy_header(info.rows + new_rows) + rows;
  write_file_atomic(dir + "/steps.npy", file.data(), file.size());

  Db db(dir + "/metadata.db", Db::Mode::read_write);
  Stmt q = db.prepare("SELECT COALESCE(MAX(id), -1) FROM runs");
  q.step();
  int64_t offset = q.col_int(0) + 1;
  int64_t first = static_cast<int64_t>(info.rows);
  for (size_t k = 0; k < runs.size(); ++k) {
    Stmt ins = db.prepare(
        "INSERT INTO runs (id, first_step_idx, num_steps, max_score, highest_tile, engine, "
        "start_time, elapsed_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    ins.bind(1, offset + static_cast<int64_t>(k));
    ins.bind(2, first);
    ins.bind(3, static_cast<int64_t>(runs[k].size()));
    ins.bind(4, static_cast<int64_t>(runs[k].meta.max_score));
    ins.bind(5, static_cast<int64_t>(runs[k].meta.highest_tile));
    ins.bind(6, std::string(runs[k].meta.engine ? *runs[k].meta.engine : ""));
    ins.bind(7, static_cast<int64_t>(runs[k].meta.start_unix_s));
    ins.bind(8, static_cast<double>(runs[k].meta.elapsed_s));
    ins.step();
    first += static_cast<int64_t>(runs[k].size());
  }
}

// A dataset the way upstream's `dataset build` writes it: no manifest.
void upstream_build(const std::string& dir, const std::vector<run::Run>& runs) {
  fs::create_directories(dir);
  std::string file = other_npy_header(0);
  write_file_atomic(dir + "/steps.npy", file.data(), file.size());
  {
    Db db(dir + "/metadata.db", Db::Mode::create);
    create_schema(db);
  }
  // An upstream build is an append to nothing, with global ids (0..n-1).
  upstream_append(dir, runs);
}

// The reference: what each row and run should be, batch by batch.
struct Part {
  std::vector<run::Run> runs;
  uint64_t first_id;
  bool local;  // rows carry run-local ids
};

void expect_content(const std::string& dir, const std::vector<Part>& parts) {
  auto d = open_ds(dir);
  uint64_t row = 0, runs = 0;
  for (const Part& p : parts)
    for (size_t k = 0; k < p.runs.size(); ++k, ++runs)
      for (size_t s = 0; s < p.runs[k].size(); ++s, ++row) {
        ASSERT_LT(row, d->rows());
        uint32_t id = static_cast<uint32_t>(p.local ? k : p.first_id + k);
        dstest::expect_row(d->data() + row * 32, dstest::expected_row(p.runs[k], s, id),
                           fmt::format("row {}", row));
      }
  EXPECT_EQ(d->rows(), row);
  EXPECT_EQ(d->runs(), runs);
  // Every run selects exactly its own rows.
  row = 0;
  for (const Part& p : parts)
    for (size_t k = 0; k < p.runs.size(); ++k) {
      auto r = d->select("id = ?", {SqlParam{SqlParam::integer, static_cast<int64_t>(p.first_id + k)}});
      uint64_t n = p.runs[k].size();
      if (n) {
        ASSERT_EQ(r.size(), 1u) << "run " << p.first_id + k;
        EXPECT_EQ(r[0].first, static_cast<int64_t>(row));
        EXPECT_EQ(r[0].count, static_cast<int64_t>(n));
      }
      row += n;
    }
  auto v = verify(dir, false, 1);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
  bool any_local = false;
  for (const Part& p : parts) any_local |= p.local;
  bool reported = false;
  for (const auto& w : v.warnings) reported |= w.find("run-local run_ids") != std::string::npos;
  EXPECT_EQ(reported, any_local);
}

std::vector<run::Run> batch(uint64_t seed, size_t n) {
  std::vector<run::Run> v;
  for (size_t i = 0; i < n; ++i) v.push_back(make_run(seed + i, 3 + (seed + i) % 7));
  return v;
}

struct Case {
  a2test::TempDir tmp;
  std::string ds = tmp / "ds";
  int folder = 0;
  std::string runs_dir(const std::vector<run::Run>& runs) {
    std::string d = tmp / fmt::format("in{}", folder++);
    dstest::write_runs(d, runs);
    return d;
  }
  void a2_build(const std::vector<run::Run>& runs) {
    DirSource s(runs_dir(runs));
    build(s, ds, one());
  }
  std::vector<std::string> a2_append(const std::vector<run::Run>& runs) {
    DirSource s(runs_dir(runs));
    std::vector<std::string> w;
    append(s, ds, one(&w));
    return w;
  }
  nlohmann::json manifest() { return nlohmann::json::parse(dstest::slurp(ds + "/manifest.json")); }
};

}  // namespace

TEST(DatasetForeign, UpstreamAppendAfterA2packIsIncludedThenAdopted) {
  Case c;
  auto a = batch(1, 4), up = batch(20, 3), b = batch(40, 2);
  c.a2_build(a);
  upstream_append(c.ds, up);
  // Readers see upstream's runs (the manifest still says 4 runs), with a note.
  {
    auto d = open_ds(c.ds);
    EXPECT_EQ(d->runs(), 7u);
    EXPECT_EQ(d->next_run_id(), 7u);
    bool noted = false;
    for (const auto& n : d->notes()) noted |= n.find("does not record") != std::string::npos;
    EXPECT_TRUE(noted);
  }
  expect_content(c.ds, {{a, 0, false}, {up, 4, true}});
  // The next append keeps them, says so, and records them.
  auto w = c.a2_append(b);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("adopted 3 runs (ids 4..6)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("run-local"), std::string::npos) << w[0];
  expect_content(c.ds, {{a, 0, false}, {up, 4, true}, {b, 7, false}});
  auto m = c.manifest();
  EXPECT_EQ(m["runs"], 9);
  EXPECT_EQ(m["next_run_id"], 9);
  ASSERT_EQ(m["sources"].size(), 3u);
  EXPECT_EQ(m["sources"][1]["kind"], "adopted");
  EXPECT_EQ(m["sources"][1]["first_run_id"], 4);
  EXPECT_EQ(m["sources"][1]["row_run_ids"], "local");
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(c.ds)) names.insert(e.path().filename());
  EXPECT_EQ(names, (std::set<std::string>{"manifest.json", "metadata.db", "steps.npy"}));
}

TEST(DatasetForeign, UpstreamBuildThenA2packThenUpstreamThenA2pack) {
  Case c;
  auto up1 = batch(1, 3), a = batch(10, 2), up2 = batch(30, 4), b = batch(50, 1);
  upstream_build(c.ds, up1);
  expect_content(c.ds, {{up1, 0, false}});
  c.a2_append(a);
  upstream_append(c.ds, up2);
  expect_content(c.ds, {{up1, 0, false}, {a, 3, false}, {up2, 5, true}});
  c.a2_append(b);
  expect_content(c.ds, {{up1, 0, false}, {a, 3, false}, {up2, 5, true}, {b, 9, false}});
  EXPECT_EQ(c.manifest()["sources"].size(), 4u);
}

TEST(DatasetForeign, InterleavedAppendsKeepEveryRow) {
  Case c;
  auto a = batch(1, 2), u1 = batch(10, 2), u2 = batch(20, 3), b = batch(30, 2), u3 = batch(40, 1),
       u4 = batch(50, 2), d = batch(60, 2);
  c.a2_build(a);
  upstream_append(c.ds, u1);
  upstream_append(c.ds, u2);  // two upstream batches in a row: each with ids from 0
  expect_content(c.ds, {{a, 0, false}, {u1, 2, true}, {u2, 4, true}});
  c.a2_append(b);
  upstream_append(c.ds, u3);  // one run: its local id 0 ...
  upstream_append(c.ds, u4);
  auto w = c.a2_append(d);
  ASSERT_EQ(w.size(), 1u);
  expect_content(c.ds, {{a, 0, false}, {u1, 2, true}, {u2, 4, true}, {b, 7, false},
                        {u3, 9, true}, {u4, 10, true}, {d, 12, false}});
  // A repair finds nothing more to do and deletes nothing.
  RecoverOptions ro;
  auto rep = recover(c.ds, ro);
  EXPECT_TRUE(rep.actions.empty());
  expect_content(c.ds, {{a, 0, false}, {u1, 2, true}, {u2, 4, true}, {b, 7, false},
                        {u3, 9, true}, {u4, 10, true}, {d, 12, false}});
}

TEST(DatasetForeign, VerifyRepairAdoptsWithoutAppending) {
  Case c;
  auto a = batch(1, 3), up = batch(20, 2);
  c.a2_build(a);
  upstream_append(c.ds, up);
  auto v = verify(c.ds, true, 1);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
  ASSERT_FALSE(v.warnings.empty());
  EXPECT_NE(v.warnings[0].find("adopted 2 runs"), std::string::npos) << v.warnings[0];
  EXPECT_EQ(c.manifest()["runs"], 5);
  expect_content(c.ds, {{a, 0, false}, {up, 3, true}});
}

// Runs a2pack did not write and that do not fit the rows (here: what an
// a2pack without the journal could leave, runs inserted but no rows) are
// neither read nor deleted: append refuses, naming them, until asked.
TEST(DatasetForeign, InconsistentUnrecordedRunsAreRefusedNotDeleted) {
  Case c;
  auto a = batch(1, 3), b = batch(30, 2);
  c.a2_build(a);
  {
    Db db(c.ds + "/metadata.db", Db::Mode::read_write);
    db.exec("INSERT INTO runs VALUES (3, 999, 5, 1, 2, 'x', 0, 0.0)");
  }
  {
    auto d = open_ds(c.ds);
    EXPECT_EQ(d->runs(), 3u);
    bool noted = false;
    for (const auto& n : d->notes()) noted |= n.find("discard-unrecorded") != std::string::npos;
    EXPECT_TRUE(noted);
  }
  DirSource s(c.runs_dir(b));
  Error e = dstest::error_of([&] { append(s, c.ds, one()); });
  EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
  std::string msg = e.what();
  EXPECT_NE(msg.find("1 run (ids 3..3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--discard-unrecorded"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run 3 starts at row 999"), std::string::npos) << msg;
  {
    Db db(c.ds + "/metadata.db", Db::Mode::read_only);
    Stmt q = db.prepare("SELECT COUNT(*) FROM runs WHERE id = 3");
    q.step();
    EXPECT_EQ(q.col_int(0), 1) << "the run was deleted";
  }
  EXPECT_FALSE(verify(c.ds, true, 1).ok);  // repair without consent refuses too
  VerifyOptions vo;
  vo.repair = true;
  vo.discard_unrecorded = true;
  auto v = verify(c.ds, vo, 1);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
  append(s, c.ds, one());
  expect_content(c.ds, {{a, 0, false}, {b, 3, false}});
}

TEST(DatasetForeign, RowsWithoutRunsAreRefused) {
  Case c;
  auto a = batch(1, 2);
  c.a2_build(a);
  // Extra rows in steps.npy that no run covers.
  ReadFd f(c.ds + "/steps.npy");
  NpyInfo info = read_npy_info(f);
  std::string rows(info.rows * 32 + 64, '\0');
  f.pread_exact(rows.data(), info.rows * 32, info.data_offset);
  std::string file = other_npy_header(info.rows + 2) + rows;
  write_file_atomic(c.ds + "/steps.npy", file.data(), file.size());
  EXPECT_EQ(open_ds(c.ds)->rows(), info.rows);
  DirSource s(c.runs_dir(batch(9, 1)));
  Error e = dstest::error_of([&] { append(s, c.ds, one()); });
  EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
  EXPECT_NE(std::string(e.what()).find("2 rows past the"), std::string::npos) << e.what();
  EXPECT_EQ(read_npy_info(ReadFd(c.ds + "/steps.npy")).rows, info.rows + 2);
}


// a2pack's append is interrupted after it committed its runs to metadata.db
// (its journal is there), then upstream appends: a2pack removes its own
// uncommitted runs, which the journal names, and keeps upstream's.
TEST(DatasetForeign, OwnInterruptedAppendThenUpstreamAppend) {
  Case c;
  auto a = batch(1, 3), lost = batch(10, 2), up = batch(20, 2), b = batch(40, 2);
  c.a2_build(a);
  DirSource s(c.runs_dir(lost));
  ASSERT_EQ(dstest::run_child("append:db-committed", [&] { append(s, c.ds, one()); }), kCrashExitCode);
  EXPECT_TRUE(fs::exists(c.ds + "/append-journal.json"));
  expect_content(c.ds, {{a, 0, false}});
  upstream_append(c.ds, up);  // ids after a2pack's uncommitted 3..4: 5..6, rows after a's
  auto w = c.a2_append(b);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("adopted 2 runs (ids 5..6)"), std::string::npos) << w[0];
  expect_content(c.ds, {{a, 0, false}, {up, 5, true}, {b, 7, false}});
  EXPECT_FALSE(fs::exists(c.ds + "/append-journal.json"));
}

// The same after a crash once a2pack's steps file was installed: upstream's
// file then holds a2pack's uncommitted rows before its own, which no run
// covers once a2pack's runs go; a2pack refuses instead of guessing.
TEST(DatasetForeign, OwnInstalledRowsUnderUpstreamRowsAreRefused) {
  Case c;
  auto a = batch(1, 3), lost = batch(10, 2), up = batch(20, 2), b = batch(40, 2);
  c.a2_build(a);
  DirSource s(c.runs_dir(lost));
  ASSERT_EQ(dstest::run_child("append:steps-installed", [&] { append(s, c.ds, one()); }),
            kCrashExitCode);
  upstream_append(c.ds, up);
  DirSource sb(c.runs_dir(b));
  Error e = dstest::error_of([&] { append(sb, c.ds, one()); });
  EXPECT_EQ(e.status(), A2PACK_E_CORRUPT) << e.what();
  EXPECT_EQ(open_ds(c.ds)->runs(), 3u);
}

// What steers row lookup is checked at open.
TEST(DatasetForeign, SwappedFirstStepIdxIsRefusedAtOpen) {
  Case c;
  auto a = batch(1, 4);
  c.a2_build(a);
  {
    Db db(c.ds + "/metadata.db", Db::Mode::read_write);
    db.exec(
        "UPDATE runs SET first_step_idx = CASE id WHEN 1 THEN (SELECT first_step_idx FROM runs "
        "WHERE id = 2) WHEN 2 THEN (SELECT first_step_idx FROM runs WHERE id = 1) END WHERE id IN "
        "(1, 2)");
  }
  Error e = dstest::error_of([&] { open_ds(c.ds); });
  EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
  EXPECT_NE(std::string(e.what()).find("run 1 has first_step_idx"), std::string::npos) << e.what();
}

TEST(DatasetForeign, VerifyBoundsNextRunIdByTheIdsPresent) {
  Case c;
  c.a2_build(batch(1, 3));
  auto m = c.manifest();
  m["next_run_id"] = uint64_t{1} << 40;
  std::string text = m.dump();
  write_file_atomic(c.ds + "/manifest.json", text.data(), text.size());
  auto v = verify(c.ds, false, 1);
  EXPECT_FALSE(v.ok);
  ASSERT_FALSE(v.errors.empty());
  EXPECT_NE(v.errors[0].find("next_run_id is 1099511627776"), std::string::npos) << v.errors[0];
}

TEST(DatasetForeign, VerifyRunsSqliteQuickCheck) {
  Case c;
  c.a2_build(batch(1, 400));
  // Damage a page of metadata.db past the first: the b-tree header of page 3.
  std::string db = dstest::slurp(c.ds + "/metadata.db");
  ASSERT_GT(db.size(), 4 * 4096u);
  for (size_t i = 0; i < 64; ++i) db[2 * 4096 + i] = static_cast<char>(0xA5);
  write_file_atomic(c.ds + "/metadata.db", db.data(), db.size());
  auto v = verify(c.ds, false, 1);
  EXPECT_FALSE(v.ok);
  bool found = false;
  for (const auto& e : v.errors) found |= e.find("quick_check") != std::string::npos;
  EXPECT_TRUE(found) << (v.errors.empty() ? "" : v.errors[0]);
}
