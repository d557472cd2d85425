// Crash safety of build and append: a child process is ended (_exit, as a
// power cut would, no cleanup) at every named point of the commit protocol;
// the dataset must then open, verify, and hold exactly the old or the new
// content, and a later append must complete normally.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <vector>

#include "base/error.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/metadata.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;
using dstest::make_run;
namespace fs = std::filesystem;

namespace {

using dstest::run_child;

BuildOptions one_worker() {
  BuildOptions o;
  o.workers = 1;  // the child does not use the worker pool (forked threads are gone)
  return o;
}

struct Content {
  std::string rows;  // the committed rows' bytes
  std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> runs;
  bool operator==(const Content&) const = default;
};

Content content_of(const std::string& dir) {
  OpenOptions o;
  o.workers = 1;
  auto d = Dataset::open(dir, o);
  Content c;
  c.rows.assign(reinterpret_cast<const char*>(d->data()), d->rows() * 32);
  EXPECT_TRUE(d->check_rows(1, 5).empty());
  Db db(dir + "/metadata.db", Db::Mode::read_only);
  Stmt q = db.prepare("SELECT id, first_step_idx, num_steps, max_score FROM runs WHERE id < ?1 ORDER BY id");
  q.bind(1, static_cast<int64_t>(d->next_run_id()));
  while (q.step()) c.runs.emplace_back(q.col_int(0), q.col_int(1), q.col_int(2), q.col_int(3));
  return c;
}

// The run folders, written once (each file write is fsynced).
struct Runs {
  a2test::TempDir tmp;
  Runs() {
    std::vector<run::Run> a, b;
    for (int i = 0; i < 6; ++i) a.push_back(make_run(i, 10 + i));
    for (int i = 0; i < 300; ++i) b.push_back(make_run(100 + i, 1 + i % 5));  // two chunks
    dstest::write_runs(tmp / "runs", a);
    dstest::write_runs(tmp / "more", b);
  }
};
const Runs& shared_runs() {
  static Runs r;
  return r;
}

struct AppendCase {
  a2test::TempDir tmp;
  std::string ds = tmp / "ds";
  std::string more = shared_runs().tmp / "more";
  AppendCase() {
    DirSource src(shared_runs().tmp / "runs");
    build(src, ds, one_worker());
  }
};

}  // namespace

// Both ways an append writes steps.npy: extending it in place (the default)
// and writing a new file that is renamed over it (copy_steps).
static void check_append_crash_points(bool copy, const std::vector<const char*>& points) {
  BuildOptions o = one_worker();
  o.copy_steps = copy;
  // The reference: the same append without a crash.
  AppendCase ref;
  Content old_c = content_of(ref.ds);
  DirSource ref_more(ref.more);
  EXPECT_EQ(append(ref_more, ref.ds, o).steps_copied, copy);
  Content new_c = content_of(ref.ds);
  ASSERT_NE(old_c, new_c);

  for (const char* point : points) {
    SCOPED_TRACE(point);
    AppendCase s;
    DirSource more(s.more);
    ASSERT_EQ(run_child(point, [&] { append(more, s.ds, o); }), kCrashExitCode);
    Content after = content_of(s.ds);
    bool committed = std::string(point) == "append:committed";
    EXPECT_TRUE(after == (committed ? new_c : old_c));
    auto v = verify(s.ds, false, 1);
    EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
    // Appending again gives what an uninterrupted append gives.
    if (!committed) {
      append(more, s.ds, o);
      EXPECT_TRUE(content_of(s.ds) == new_c);
      std::set<std::string> names;
      for (const auto& e : fs::directory_iterator(s.ds)) names.insert(e.path().filename());
      EXPECT_EQ(names, (std::set<std::string>{"manifest.json", "metadata.db", "steps.npy"}));
    }
  }
}

TEST(DatasetCrash, InPlaceAppendLeavesOldOrNewAtEveryPoint) {
  check_append_crash_points(false, {"append:tail-claimed", "append:rows-partial",
                                    "append:steps-synced", "append:journal-written",
                                    "append:db-inserted", "append:db-committed",
                                    "append:steps-installed", "append:manifest-synced",
                                    "append:committed"});
}

TEST(DatasetCrash, CopyingAppendLeavesOldOrNewAtEveryPoint) {
  check_append_crash_points(true, {"append:old-rows-copied", "append:rows-partial",
                                   "append:steps-synced", "append:journal-written",
                                   "append:db-inserted", "append:db-committed",
                                   "append:steps-installed", "append:manifest-synced",
                                   "append:committed"});
}

TEST(DatasetCrash, InterruptedBuildLeavesNoDatasetOrThePreviousOne) {
  for (const char* point : {"build:rows-partial", "build:steps-written", "build:manifest-synced",
                            "build:before-install"}) {
    SCOPED_TRACE(point);
    a2test::TempDir tmp;
    dstest::write_runs(tmp / "runs", {make_run(1, 5), make_run(2, 7)});
    dstest::write_runs(tmp / "other", {make_run(3, 9)});
    DirSource src(tmp / "runs"), other(tmp / "other");
    // First build: nothing under the name afterwards.
    ASSERT_EQ(run_child(point, [&] { build(src, tmp / "ds", one_worker()); }), kCrashExitCode);
    EXPECT_FALSE(fs::exists(tmp / "ds"));
    // Replacing build: the previous dataset stays.
    build(other, tmp / "ds", one_worker());
    Content prev = content_of(tmp / "ds");
    BuildOptions o = one_worker();
    o.overwrite = true;
    ASSERT_EQ(run_child(point, [&] { build(src, tmp / "ds", o); }), kCrashExitCode);
    EXPECT_TRUE(content_of(tmp / "ds") == prev);
    // The next build removes the dead builds' folders.
    build(src, tmp / "ds", o);
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(tmp.path())) names.insert(e.path().filename());
    EXPECT_EQ(names, (std::set<std::string>{"ds", "other", "runs"}));
  }
}

TEST(DatasetCrash, ExchangedBuildIsTheNewDataset) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "runs", {make_run(1, 5)});
  dstest::write_runs(tmp / "other", {make_run(3, 9)});
  DirSource src(tmp / "runs"), other(tmp / "other");
  build(other, tmp / "ds", one_worker());
  BuildOptions o = one_worker();
  o.overwrite = true;
  ASSERT_EQ(run_child("build:exchanged", [&] { build(src, tmp / "ds", o); }), kCrashExitCode);
  OpenOptions oo;
  oo.workers = 1;
  EXPECT_EQ(Dataset::open(tmp / "ds", oo)->rows(), 5u);
}
