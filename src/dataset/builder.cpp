// Building a dataset: the rows of a source's runs (or rows given whole)
// written into a temporary sibling folder with their metadata.db and
// manifest, then put in place of the output folder in one rename (or an
// atomic exchange with the dataset it replaces).
#include "dataset/builder.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/worker_pool.hpp"
#include "dataset/build_dir.hpp"
#include "dataset/digest.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/metadata.hpp"
#include "dataset/npy.hpp"
#include "dataset/row.hpp"
#include "dataset/row_stream.hpp"
#include "dataset/shards.hpp"
#include "dataset/writing.hpp"

namespace a2pack::dataset {

namespace fs = std::filesystem;

namespace {

std::atomic<uint64_t> g_old_counter{0};  // names of previous datasets being swapped out


std::string replace_refusal(const std::string& out, const std::string& why) {
  return fmt::format("{}: exists and does not look like a dataset: {}; refusing to replace it "
                     "(--overwrite replaces only an empty folder or a dataset)",
                     out, why);
}

// The marker is removed from a dataset just put in place; a failure leaves
// only a file readers note and the next append removes, so it is told.
void drop_marker(const std::string& dir, const NoteFn& note) {
  try {
    remove_folder_marker(dir);
  } catch (const Error& e) {
    note(fmt::format("{} (readers note it; the next append or `verify --repair` removes it)",
                     e.what()));
  }
}

void discard_previous(const std::string& dir, const NoteFn& note) {
  if (std::string why = remove_build_folder(dir); !why.empty())
    note(fmt::format("left the previous dataset at {}: {}; remove it by hand", printable(dir),
                     why));
}

// Put the finished folder `tmp` in place of `out`; with `replace`, `out` is
// a dataset (checked again under its lock) that is then deleted.
void install_dir(TempFolder& tmp_folder, const std::string& out, bool replace,
                 int64_t lock_timeout_ms, const NoteFn& note) {
  const std::string tmp = tmp_folder.path();
  const std::string parent = parent_dir(out);
  if (!replace) {
    if (::rename(tmp.c_str(), out.c_str()) != 0) fail_errno("rename to " + out, tmp, errno);
    tmp_folder.release();
    fsync_dir(parent);
    drop_marker(out, note);
    return;
  }
  DirLock lock(out, /*exclusive=*/true, lock_timeout_ms);  // no append is running in it
  if (std::string why = why_not_replaceable(out); !why.empty())
    fail(A2PACK_E_INVALID_ARGUMENT, "{}", replace_refusal(out, why));
  // The previous dataset is marked as a2pack's, under the name it is about
  // to get, so that if this process dies after the swap, the next build
  // knows it for a leftover. (A dataset that cannot be marked, in a folder
  // this process may not write, cannot be emptied either: it is swapped out
  // and left, with a note.)
  const std::string tmp_name = fs::path(tmp).filename().string();
  bool marked = false;
  try {
    write_folder_marker(out, tmp_name);
    marked = true;
  } catch (const Error&) {
  }
  auto unmark = [&] {
    if (!marked) return;
    try {
      remove_folder_marker(out);
    } catch (const Error&) {
    }
  };
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) {
    tmp_folder.release();
    fsync_dir(parent);
    crash_point("build:exchanged");
    drop_marker(out, note);  // the new dataset's
    discard_previous(tmp, note);
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
    int err = errno;
    unmark();
    fail_errno("exchange with " + out, tmp, err);
  }
  // No atomic exchange on this file system: two renames, between which no
  // dataset is under `out` (the old one is at `old` until the second).
  std::string old = fmt::format("{}.old-{}-{}", out, ::getpid(), g_old_counter.fetch_add(1));
  if (marked) {
    try {
      write_folder_marker(out, fs::path(old).filename().string());
    } catch (const Error&) {
    }
  }
  if (::rename(out.c_str(), old.c_str()) != 0) {
    int err = errno;
    unmark();
    fail_errno("rename to " + old, out, err);
  }
  if (::rename(tmp.c_str(), out.c_str()) != 0) {
    int err = errno;
    if (::rename(old.c_str(), out.c_str()) == 0) unmark();
    fail_errno("rename to " + out, tmp, err);
  }
  tmp_folder.release();
  fsync_dir(parent);
  drop_marker(out, note);
  discard_previous(old, note);
}

// Write the dataset folder `out_dir` whose rows `fill` streams into steps.npy
// (after the header), atomically: a temporary sibling folder renamed into
// place. `build` and `build_from_rows` differ only in `fill`, so the files
// they write cannot drift apart.
BuildResult build_folder(const std::string& out_dir, const BuildOptions& o,
                         const std::string& input, const std::string& kind,
                         const std::function<StreamResult(const RowSink&)>& fill) {
  require_local(out_dir);
  const std::string out = strip_slashes(out_dir);
  if (out.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "the output folder name is empty");
  struct stat st;
  bool exists = ::lstat(out.c_str(), &st) == 0;
  if (exists) {
    if (!S_ISDIR(st.st_mode))
      fail(A2PACK_E_INVALID_ARGUMENT, "{}: exists and is not a folder", out);
    if (!o.overwrite)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "{}: already exists; pass --overwrite to replace it, or use `dataset append` to add "
           "runs to it",
           out);
    if (std::string why = why_not_replaceable(out); !why.empty())
      fail(A2PACK_E_INVALID_ARGUMENT, "{}", replace_refusal(out, why));
  }
  const NoteFn note = [&](const std::string& s) {
    if (o.on_note) o.on_note(s);
  };
  clean_leftover_folders(out, note);
  TempFolder tmp_folder(out);  // removed, with what was written, on any error
  const std::string& tmp = tmp_folder.path();
  BuildResult r;
  StreamResult res;
  std::vector<ShardRecord> shards;
  if (o.shard_rows) {
    ShardWriter w(tmp, 0, 0, o.shard_rows);
    res = fill([&](const uint8_t* p, size_t, const uint64_t* ends, size_t k) {
      w.put(p, ends, k);
    });
    w.finish();
    w.install();
    shards = w.shards();
  } else {
    TempFile steps(tmp + "/steps.npy");
    std::string hdr = npy_header(0);
    steps.write(hdr.data(), hdr.size());
    res = fill([&](const uint8_t* p, size_t n, const uint64_t*, size_t) { steps.write(p, n); });
    hdr = npy_header(res.rows);
    steps.pwrite(hdr.data(), hdr.size(), 0);
    steps.sync();
    steps.install();
  }
  crash_point("build:steps-written");
  {
    Db db(tmp + "/metadata.db", Db::Mode::create);
    set_durable(db);
    db.exec("BEGIN");
    create_schema(db);
    create_digest_table(db);
    insert_runs(db, res.runs);
    insert_digests(db, res.runs, res.digests, res.dup_of);
    db.exec("COMMIT");
  }
  Manifest m;
  m.rows = res.rows;
  m.runs = res.runs.size();
  m.next_run_id = m.runs;
  m.steps_crc32c = res.crc;
  m.created_utc = m.updated_utc = utc_now();
  m.generator = generator_name();
  m.sources.push_back({input, kind, m.runs, m.rows, 0, m.created_utc});
  if (o.shard_rows) {
    m.format_version = kShardedFormatVersion;
    m.sharded = true;
    m.shard_rows = o.shard_rows;
    m.shards = std::move(shards);
  }
  m.run_digests = true;
  stamp_metadata(m, tmp + "/metadata.db");
  write_manifest(tmp, m, "build:manifest-synced");
  fsync_dir(tmp);
  crash_point("build:before-install");
  install_dir(tmp_folder, out, exists, o.lock_timeout_ms, note);
  r.runs_added = r.total_runs = m.runs;
  r.rows_added = r.total_rows = m.rows;
  r.runs_skipped = res.skipped;
  r.runs_duplicated = res.duplicates();
  return r;
}

}  // namespace

BuildResult build(const RunSource& src, const std::string& out_dir, const BuildOptions& o) {
  DuplicateCheck check(nullptr, o.allow_duplicates, [&](size_t i) { return src.label(i); });
  DupContext dup{check, strip_slashes(out_dir), false};
  return build_folder(out_dir, o, src.input(), src.kind(), [&](const RowSink& out) {
    return stream_rows(src, out, 0, 0, 0, o, "build:rows-partial", dup);
  });
}

BuildResult build_from_rows(const uint8_t* rows, uint64_t n_rows, std::vector<RunRow> runs,
                            const std::string& input, const std::string& kind,
                            const std::string& out_dir, const BuildOptions& o) {
  if (n_rows && !rows) fail(A2PACK_E_INVALID_ARGUMENT, "rows is NULL but n_rows is {}", n_rows);
  if (runs.size() > (uint64_t{1} << 32))
    fail(A2PACK_E_UNSUPPORTED, "{} runs exceed the u32 run_id of a row", runs.size());
  // The rows must be the runs' rows, in order: run i's num_steps rows, with
  // run_id i and step_index 0, 1, ... (the caller computed them; a mismatch
  // would be a dataset whose rows and metadata.db disagree).
  uint64_t row = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    RunRow& r = runs[i];
    if (r.num_steps < 0 || static_cast<uint64_t>(r.num_steps) > kMaxRunSteps)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "run {}: num_steps {} is outside 0..{} (a row's step_index is a u16)", i, r.num_steps,
           kMaxRunSteps);
    const auto ns = static_cast<uint64_t>(r.num_steps);
    if (ns > n_rows - row)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "run {}: its {} steps end past the {} rows given (the runs' num_steps add up to more "
           "rows than n_rows)",
           i, ns, n_rows);
    for (uint64_t s = 0; s < ns; ++s) {
      const uint8_t* p = rows + (row + s) * kRowBytes;
      uint32_t rid;
      uint16_t si;
      std::memcpy(&rid, p + kOffRunId, sizeof rid);
      std::memcpy(&si, p + kOffStepIndex, sizeof si);
      if (rid != i || si != static_cast<uint16_t>(s))
        fail(A2PACK_E_INVALID_ARGUMENT,
             "row {}: run_id {} step_index {}, but it is step {} of run {} by the runs' "
             "num_steps",
             row + s, rid, si, s, i);
    }
    r.id = static_cast<int64_t>(i);
    r.first_step_idx = static_cast<int64_t>(row);
    row += ns;
  }
  if (row != n_rows)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{} rows given, but the runs' num_steps add up to {}", n_rows, row);
  // The runs' digests, then the duplicate check, before anything is written.
  std::vector<RunDigest> digests(runs.size());
  {
    const unsigned nw = resolve_workers(o.workers);
    std::vector<std::unique_ptr<RunHasher>> hashers(nw);
    parallel_for_worker(runs.size(), nw, [&](unsigned w, size_t i) {
      if (!hashers[w]) hashers[w] = std::make_unique<RunHasher>();
      digests[i] = hashers[w]->digest(
          runs[i], rows + static_cast<uint64_t>(runs[i].first_step_idx) * kRowBytes);
    });
  }
  std::vector<int64_t> dup_of(runs.size());
  DuplicateCheck check(nullptr, o.allow_duplicates,
                       [](size_t i) { return fmt::format("run {}", i); });
  for (size_t i = 0; i < runs.size(); ++i)
    dup_of[i] = check.add(digests[i], static_cast<int64_t>(i), i);
  if (check.refusing())
    fail(A2PACK_E_INVALID_ARGUMENT, "{}", check.refusal(strip_slashes(out_dir), runs.size(), false));
  return build_folder(out_dir, o, input, kind, [&](const RowSink& out) {
    StreamResult res;
    res.digests = std::move(digests);
    res.dup_of = std::move(dup_of);
    // In slices of whole runs of about 32 MiB, each CRC'd while still in cache.
    constexpr uint64_t kSlice = uint64_t{1} << 20;  // rows
    std::vector<uint64_t> ends;
    uint64_t a = 0;
    for (size_t i = 0; i < runs.size();) {
      ends.assign(1, 0);
      while (i < runs.size() &&
             (ends.back() == 0 || ends.back() + static_cast<uint64_t>(runs[i].num_steps) <= kSlice))
        ends.push_back(ends.back() + static_cast<uint64_t>(runs[i++].num_steps));
      const uint64_t k = ends.back();
      out(rows + a * kRowBytes, k * kRowBytes, ends.data(), ends.size() - 1);
      res.crc = crc32c::extend(res.crc, rows + a * kRowBytes, k * kRowBytes);
      a += k;
    }
    res.rows = n_rows;
    res.runs = std::move(runs);
    return res;
  });
}

}  // namespace a2pack::dataset
