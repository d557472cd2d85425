// Damaged dataset files made here, byte by byte: a metadata.db cut short or
// with an index that no longer matches its table, and a manifest.json that is
// not UTF-8. Every reader and writer must refuse them naming the file, never
// answer a filter quietly wrong, and never fail as an internal error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/utf8.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/metadata.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;
namespace fs = std::filesystem;

namespace {

BuildOptions one() {
  BuildOptions o;
  o.workers = 1;
  return o;
}

std::unique_ptr<Dataset> open_ds(const std::string& dir, bool verify_crc = true) {
  OpenOptions o;
  o.workers = 1;
  o.verify_crc = verify_crc;
  return Dataset::open(dir, o);
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A dataset of n runs over two engines, and a folder of more runs to append.
struct Case {
  a2test::TempDir tmp;
  std::string ds = tmp / "ds";
  std::string more = tmp / "more";
  explicit Case(size_t n) {
    std::vector<run::Run> runs, extra;
    for (size_t i = 0; i < n; ++i)
      runs.push_back(dstest::make_run(i, 3 + i % 5, 1, i % 3 ? "engine-a" : "engine-b"));
    for (size_t i = 0; i < 2; ++i) extra.push_back(dstest::make_run(100 + i, 4));
    dstest::write_runs(tmp / "in", runs);
    dstest::write_runs(more, extra);
    DirSource s(tmp / "in");
    build(s, ds, one());
  }
  std::string db() const { return ds + "/metadata.db"; }
};

void put(const std::string& path, const std::string& bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

// Every entry point that reads metadata.db refuses the folder with CORRUPT,
// naming metadata.db and containing `what`; the writers change nothing.
void expect_refused_everywhere(const Case& c, const std::string& what) {
  const std::string before = dstest::slurp(c.db());
  for (bool crc : {true, false}) {
    Error e = dstest::error_of([&] { open_ds(c.ds, crc); });
    EXPECT_EQ(e.status(), A2PACK_E_CORRUPT) << e.what();
    EXPECT_TRUE(has(e.what(), c.db())) << e.what();
    EXPECT_TRUE(has(e.what(), what)) << e.what();
    if (what.rfind("index", 0) == 0) break;  // verify_crc = false skips the index pass
  }
  VerifyReport v = verify(c.ds, false, 1);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.status, A2PACK_E_CORRUPT);
  bool named = false;
  for (const auto& m : v.errors) named |= has(m, c.db()) && has(m, what);
  EXPECT_TRUE(named) << (v.errors.empty() ? "" : v.errors.back());

  DirSource s(c.more);
  Error a = dstest::error_of([&] { append(s, c.ds, one()); });
  EXPECT_EQ(a.status(), A2PACK_E_CORRUPT) << a.what();
  EXPECT_TRUE(has(a.what(), c.db())) << a.what();
  VerifyOptions vo;
  vo.repair = true;
  VerifyReport r = verify(c.ds, vo, 1);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, A2PACK_E_CORRUPT);
  EXPECT_EQ(dstest::slurp(c.db()), before) << "a writer changed the damaged file";
}

}  // namespace

// One byte missing from the end. SQLite counts the partial page
// as a page and reads it zero-padded, so without a check a filter answered
// from a changed index entry.
TEST(DatasetDamage, MetadataDbCutByOneByteIsRefused) {
  Case c(300);
  std::string db = dstest::slurp(c.db());
  ASSERT_EQ(db.size() % 4096, 0u);
  put(c.db(), db.substr(0, db.size() - 1));
  expect_refused_everywhere(c, "cut short");
}

TEST(DatasetDamage, MetadataDbCutAtOrPastAPageBoundaryIsRefused) {
  for (size_t cut : {size_t{4096}, size_t{4097}, size_t{2 * 4096 - 100}}) {
    Case c(300);
    std::string db = dstest::slurp(c.db());
    ASSERT_GT(db.size(), 3 * 4096u);
    put(c.db(), db.substr(0, db.size() - cut));
    Error e = dstest::error_of([&] { open_ds(c.ds); });
    EXPECT_EQ(e.status(), A2PACK_E_CORRUPT) << "cut " << cut << ": " << e.what();
    EXPECT_TRUE(has(e.what(), c.db())) << e.what();
    EXPECT_FALSE(verify(c.ds, false, 1).ok) << "cut " << cut;
  }
}

// An index entry that points at another run (its rowid's last byte changed),
// the file otherwise whole: SQLite's quick_check does not compare indexes
// with the table, so `engine = ?` would return the wrong runs.
TEST(DatasetDamage, IndexThatDisagreesWithItsTableIsRefused) {
  Case c(40);  // idx_runs_engine fits one leaf page
  int64_t root = 0;
  {
    Db db(c.db(), Db::Mode::read_only);
    Stmt q = db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'idx_runs_engine'");
    ASSERT_TRUE(q.step());
    root = q.col_int(0);
  }
  std::string db = dstest::slurp(c.db());
  const size_t page = static_cast<size_t>(root - 1) * 4096;
  ASSERT_EQ(static_cast<uint8_t>(db[page]), 0x0Au) << "not a leaf index page";
  // Cells fill a page from its end: the last byte is the low byte of the
  // rowid of one entry.
  db[page + 4095] = static_cast<char>(db[page + 4095] ^ 0x01);
  put(c.db(), db);
  expect_refused_everywhere(c, "index idx_runs_engine");
  // verify_crc = false skips the pass (documented); verify --full still
  // names the damage.
  EXPECT_NO_THROW(open_ds(c.ds, false));
  VerifyOptions full;
  full.full = true;
  VerifyReport v = verify(c.ds, full, 1);
  EXPECT_FALSE(v.ok);
}

TEST(DatasetDamage, IntactDatabasesStillOpenWithAnyIndexes) {
  Case c(50);
  EXPECT_EQ(open_ds(c.ds)->runs(), 50u);
  {
    // Another tool's extra indexes: multi-column, partial, on an expression.
    Db db(c.db(), Db::Mode::read_write);
    db.exec(
        "CREATE INDEX x_two ON runs(highest_tile, max_score);"
        "CREATE INDEX x_part ON runs(start_time) WHERE num_steps > 4;"
        "CREATE INDEX x_expr ON runs(max_score * 2);"
        "CREATE INDEX x_text ON runs(engine COLLATE NOCASE);");
  }
  auto d = open_ds(c.ds);
  EXPECT_EQ(d->runs(), 50u);
  EXPECT_TRUE(verify(c.ds, false, 1).ok);
}

// Invalid UTF-8 in manifest.json is CORRUPT naming the file and
// the byte on every path; the messages themselves are valid UTF-8, and the
// verify report is written as JSON.
TEST(DatasetDamage, ManifestWithInvalidUtf8IsCorruptNamingTheFileAndByte) {
  Case c(10);
  const std::string mpath = c.ds + "/manifest.json";
  std::string m = dstest::slurp(mpath);
  size_t at = m.find("\"input\": \"");
  ASSERT_NE(at, std::string::npos);
  at += 11;
  m.insert(at, "\xff");
  put(mpath, m);
  const std::string where = fmt::format("byte offset {}", at);
  auto expect_named = [&](const std::string& msg) {
    EXPECT_TRUE(has(msg, mpath)) << msg;
    EXPECT_TRUE(has(msg, where)) << msg;
    EXPECT_TRUE(has(msg, "\\xff")) << msg;
    EXPECT_TRUE(utf8::valid(msg.data(), msg.size())) << msg;
  };
  Error e = dstest::error_of([&] { open_ds(c.ds); });
  EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
  expect_named(e.what());

  VerifyReport v = verify(c.ds, false, 1);
  EXPECT_EQ(v.status, A2PACK_E_CORRUPT);
  ASSERT_FALSE(v.errors.empty());
  expect_named(v.errors[0]);
  auto j = nlohmann::json::parse(v.to_json());
  EXPECT_FALSE(j["ok"].get<bool>());

  DirSource s(c.more);
  Error a = dstest::error_of([&] { append(s, c.ds, one()); });
  EXPECT_EQ(a.status(), A2PACK_E_CORRUPT);
  expect_named(a.what());
  Error r = dstest::error_of([&] { recover(c.ds, RecoverOptions{}); });
  EXPECT_EQ(r.status(), A2PACK_E_CORRUPT);
  expect_named(r.what());
  EXPECT_EQ(dstest::slurp(mpath), m) << "a writer replaced the damaged manifest";
}

// Text from outside (an input folder's name, engine strings another tool
// wrote) need not be UTF-8: the manifest, stats and verify report still get
// written, with U+FFFD in place of such bytes.
TEST(DatasetDamage, NonUtf8NamesAndEnginesAreWrittenAsReplacementCharacters) {
  a2test::TempDir tmp;
  const std::string in = tmp / "in\xff";
  dstest::write_runs(in, {dstest::make_run(1, 4), dstest::make_run(2, 5)});
  const std::string ds = tmp / "ds";
  DirSource s(in);
  build(s, ds, one());
  auto m = nlohmann::json::parse(dstest::slurp(ds + "/manifest.json"));
  EXPECT_TRUE(has(m["sources"][0]["input"].get<std::string>(), "in\xef\xbf\xbd"));
  {
    Db db(ds + "/metadata.db", Db::Mode::read_write);
    db.exec("UPDATE runs SET engine = CAST(x'41ff42' AS TEXT) WHERE id = 1");
  }
  auto d = open_ds(ds);
  auto stats = nlohmann::json::parse(d->stats_json(1));
  EXPECT_EQ(stats["engines"]["A\xef\xbf\xbd" "B"].get<int>(), 1);
  // The engine changed behind a2pack's back, so run 1's recorded content
  // digest no longer matches; repair records the new one, raw bytes and all.
  auto v = verify(ds, false, 1);
  ASSERT_EQ(v.errors.size(), 1u);
  EXPECT_TRUE(has(v.errors[0], "digests of 1 runs (run 1) do not match")) << v.errors[0];
  EXPECT_TRUE(verify(ds, true, 1).ok);
  EXPECT_TRUE(verify(ds, false, 1).ok);
}
