// What the dataset writers touch besides the dataset: the leftover folders a
// build removes (its own only), metadata.db reached through a link, files it
// cannot write, and the text of JSON files in errors.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "base/error.hpp"
#include "dataset/build_dir.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/manifest.hpp"
#include "dataset/metadata.hpp"
#include "dataset/source.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;
using dstest::make_run;
namespace fs = std::filesystem;

namespace {

BuildOptions one_worker(std::vector<std::string>* notes = nullptr) {
  BuildOptions o;
  o.workers = 1;  // a forked child has no worker threads
  if (notes) o.on_note = [notes](const std::string& n) { notes->push_back(n); };
  return o;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool any_has(const std::vector<std::string>& v, const std::string& a, const std::string& b = "") {
  for (const auto& s : v)
    if (has(s, a) && has(s, b)) return true;
  return false;
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename());
  return out;
}

// Makes a file or folder unwritable to this process for the guard's life:
// mode bits for a user, the immutable attribute for root (whom mode bits do
// not stop). ok() is false where neither can be done.
class Unwritable {
 public:
  explicit Unwritable(const std::string& path) : path_(path) {
    struct stat st;
    ::stat(path.c_str(), &st);
    mode_ = st.st_mode & 07777;
    if (::geteuid() != 0) {
      ok_ = ::chmod(path.c_str(), S_ISDIR(st.st_mode) ? 0555 : 0444) == 0;
      chmod_ = true;
      return;
    }
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    int flags = 0;
    if (fd >= 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
      flags |= FS_IMMUTABLE_FL;
      ok_ = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
    }
    if (fd >= 0) ::close(fd);
  }
  ~Unwritable() {
    if (!ok_) return;
    if (chmod_) {
      ::chmod(path_.c_str(), mode_);
      return;
    }
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    int flags = 0;
    if (fd >= 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
      flags &= ~FS_IMMUTABLE_FL;
      ::ioctl(fd, FS_IOC_SETFLAGS, &flags);
    }
    if (fd >= 0) ::close(fd);
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  mode_t mode_ = 0;
  bool ok_ = false, chmod_ = false;
};

}  // namespace

TEST(DatasetFolders, AKilledBuildsFolderIsRemovedAndNoted) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "runs", {make_run(1, 5), make_run(2, 7)});
  DirSource src(tmp / "runs");
  const std::string ds = tmp / "ds";
  ASSERT_EQ(dstest::run_child("build:rows-partial", [&] { build(src, ds, one_worker()); }),
            kCrashExitCode);
  std::string left;
  for (const auto& n : names_in(tmp.path()))
    if (n.rfind("ds.tmp-", 0) == 0) left = tmp / n;
  ASSERT_FALSE(left.empty());
  EXPECT_TRUE(fs::is_regular_file(left + "/" + kFolderMarker));
  std::vector<std::string> notes;
  build(src, ds, one_worker(&notes));
  EXPECT_FALSE(fs::exists(left));
  EXPECT_TRUE(any_has(notes, "removed " + left, "did not finish")) << ::testing::PrintToString(notes);
  EXPECT_EQ(names_in(tmp.path()), (std::set<std::string>{"ds", "runs"}));
  // The dataset holds no marker once in place.
  EXPECT_EQ(names_in(ds), (std::set<std::string>{"manifest.json", "metadata.db", "steps.npy"}));
}

TEST(DatasetFolders, AFolderOfTheSameShapeThatA2packDidNotMarkIsKept) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "runs", {make_run(1, 5)});
  DirSource src(tmp / "runs");
  fs::create_directories(tmp / "ds.tmp-999999999-0");
  fs::create_directories(tmp / "ds.old-999999999-1");
  a2test::write_bytes(tmp / "ds.old-999999999-1/steps.npy", "mine", 4);
  // A marker naming another folder (copied here) does not make this one a2pack's.
  fs::create_directories(tmp / "ds.tmp-999999999-2");
  write_folder_marker(tmp / "ds.tmp-999999999-2", "ds.tmp-999999999-9");
  std::vector<std::string> notes;
  build(src, tmp / "ds", one_worker(&notes));
  EXPECT_TRUE(fs::is_directory(tmp / "ds.tmp-999999999-0"));
  EXPECT_EQ(dstest::slurp(tmp / "ds.old-999999999-1/steps.npy"), "mine");
  EXPECT_TRUE(fs::is_directory(tmp / "ds.tmp-999999999-2"));
  EXPECT_TRUE(any_has(notes, "ds.tmp-999999999-0 alone", "no a2pack-temp-folder"));
  EXPECT_TRUE(any_has(notes, "ds.old-999999999-1 alone"));
  EXPECT_TRUE(any_has(notes, "ds.tmp-999999999-2 alone", "not the mark"));
}

TEST(DatasetFolders, DbOpenedForWritingRefusesALink) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "runs", {make_run(1, 5)});
  DirSource src(tmp / "runs");
  build(src, tmp / "ds", one_worker());
  fs::rename(tmp / "ds/metadata.db", tmp / "real.db");
  fs::create_symlink(tmp / "real.db", tmp / "ds/metadata.db");
  const std::string link = tmp / "ds/metadata.db";
  for (Db::Mode mode : {Db::Mode::read_write, Db::Mode::create}) {
    Error e = dstest::error_of([&] { Db db(link, mode); });
    EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT) << e.what();
    EXPECT_TRUE(has(e.what(), link + ": is a symbolic link")) << e.what();
  }
  Db reader(link, Db::Mode::read_only);  // reading through it is fine
  check_schema(reader);
  // A reader of the dataset opens it read-only.
  OpenOptions oo;
  oo.workers = 1;
  EXPECT_EQ(Dataset::open(tmp / "ds", oo)->runs(), 1u);
}

TEST(DatasetFolders, AJournalSqliteCannotCreateIsNamed) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "runs", {make_run(1, 5)});
  DirSource src(tmp / "runs");
  const std::string ds = tmp / "ds";
  build(src, ds, one_worker());
  Db db(ds + "/metadata.db", Db::Mode::read_write);
  set_durable(db);
  Unwritable guard(ds);
  if (!guard.ok()) GTEST_SKIP() << "cannot make a folder unwritable here";
  Error e = dstest::error_of([&] { db.exec("BEGIN IMMEDIATE; DELETE FROM runs; COMMIT"); });
  EXPECT_EQ(e.status(), A2PACK_E_IO) << e.what();
  EXPECT_TRUE(has(e.what(), ds + "/metadata.db-journal: SQLite cannot create it: ")) << e.what();
  EXPECT_TRUE(has(e.what(), std::strerror(::geteuid() == 0 ? EPERM : EACCES))) << e.what();
}

TEST(DatasetFolders, JsonErrorsNameTheOffsetAndQuoteNoText) {
  const std::string text = "{\"format\": \"a2pack-steps\", \"rows\": \"SECRETTEXT-and-more";
  Error e = dstest::error_of([&] { parse_manifest(text, "m.json"); });
  EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
  EXPECT_TRUE(has(e.what(), "m.json: not valid JSON at byte offset ")) << e.what();
  EXPECT_FALSE(has(e.what(), "SECRET")) << e.what();
  // A key of the wrong type is named by its type, not its value.
  Error t = dstest::error_of([&] {
    parse_manifest("{\"format\": \"a2pack-steps\", \"format_version\": \"SECRET\"}", "m.json");
  });
  EXPECT_TRUE(has(t.what(), "\"format_version\" must be a non-negative integer, found string"))
      << t.what();
  EXPECT_FALSE(has(t.what(), "SECRET")) << t.what();
}

TEST(DatasetFolders, ReadersDuringReplacingBuildsSeeOneDatasetOrTheOther) {
  a2test::TempDir tmp;
  dstest::write_runs(tmp / "a", {make_run(1, 5), make_run(2, 7)});
  dstest::write_runs(tmp / "b", {make_run(3, 9)});
  DirSource a(tmp / "a"), b(tmp / "b");
  const std::string ds = tmp / "ds";
  build(a, ds, one_worker());
  BuildOptions o = one_worker();
  o.overwrite = true;
  std::atomic<bool> done{false};
  std::vector<std::string> problems;
  std::thread reader([&] {
    OpenOptions oo;
    oo.workers = 1;
    while (!done) {
      try {
        auto d = Dataset::open(ds, oo);
        const bool is_a = d->rows() == 12 && d->runs() == 2, is_b = d->rows() == 9 && d->runs() == 1;
        if (!is_a && !is_b) problems.push_back(fmt::format("{} rows, {} runs", d->rows(), d->runs()));
      } catch (const Error& e) {
        problems.push_back(e.what());
      }
    }
  });
  for (int i = 0; i < 6; ++i) build(i % 2 ? a : b, ds, o);
  done = true;
  reader.join();
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  EXPECT_EQ(names_in(tmp.path()), (std::set<std::string>{"a", "b", "ds"}));
}
