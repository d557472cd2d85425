#include "dataset/builder.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <cstring>
#include <functional>
#include <optional>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/path_prefix.hpp"
#include "base/worker_pool.hpp"
#include "dataset/build_dir.hpp"
#include "dataset/db_check.hpp"
#include "dataset/digest.hpp"
#include "dataset/foreign.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/journal.hpp"
#include "dataset/metadata.hpp"
#include "dataset/npy.hpp"
#include "dataset/shards.hpp"
#include "dataset/row.hpp"
#include "run/codec.hpp"

namespace a2pack::dataset {

namespace fs = std::filesystem;

namespace {

// Runs decoded per round: the memory a build holds is about this many run
// payloads plus their rows, whatever the dataset's size.
constexpr size_t kChunkRuns = 256;

std::atomic<uint64_t> g_old_counter{0};  // names of previous datasets being swapped out

bool path_exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

std::string generator_name() { return std::string("a2pack ") + A2PACK_VERSION_STRING; }

int64_t to_sql_int(uint64_t v, const char* what, const std::string& label) {
  if (v > static_cast<uint64_t>(INT64_MAX))
    fail(A2PACK_E_UNSUPPORTED, "{}: {} {} does not fit SQLite's 64-bit INTEGER", label, what, v);
  return static_cast<int64_t>(v);
}

template <typename F>
void catch_into(std::exception_ptr& slot, F&& fn) {
  try {
    fn();
  } catch (...) {
    slot = std::current_exception();
  }
}


struct StreamResult {
  std::vector<RunRow> runs;
  std::vector<RunDigest> digests;  // runs[i]'s content digest
  std::vector<int64_t> dup_of;     // the id of the run runs[i] repeats, or -1
  uint64_t rows = 0;
  uint32_t crc = 0;
  uint64_t skipped = 0;
  uint64_t duplicates() const {
    return static_cast<uint64_t>(std::count_if(dup_of.begin(), dup_of.end(),
                                               [](int64_t d) { return d >= 0; }));
  }
};

// What a writer checks its runs' digests against: the dataset's runs (an
// append), and each other. `where` names the dataset in a refusal.
struct DupContext {
  DuplicateCheck& check;
  std::string where;
  bool append = false;
};

// The metadata.db row of a decoded run but for where it goes (id,
// first_step_idx), as the digest hashes it: the values insert_runs stores.
RunRow meta_row(const run::Meta& m, uint64_t n_steps) {
  RunRow r;
  r.num_steps = static_cast<int64_t>(n_steps);
  r.max_score = static_cast<int64_t>(m.max_score);
  r.highest_tile = m.highest_tile;
  r.engine = m.engine;
  r.start_time = static_cast<int64_t>(m.start_unix_s);
  r.elapsed_s = m.elapsed_s;
  return r;
}

// With skip_bad: turn the failures of a round into skips (told to
// on_bad_input, in input order, from this thread); otherwise rethrow the first.
size_t take_failures(std::vector<std::exception_ptr>& errors, size_t k, size_t a,
                     std::vector<char>& skip, const RunSource& src, const BuildOptions& o,
                     StreamResult& res) {
  size_t found = 0;
  for (size_t j = 0; j < k; ++j) {
    if (!errors[j]) continue;
    if (!o.skip_bad) std::rethrow_exception(errors[j]);
    a2pack_status st = A2PACK_E_INTERNAL;
    std::string msg;
    try {
      std::rethrow_exception(errors[j]);
    } catch (const Error& e) {
      st = e.status();
      msg = e.what();
    } catch (const std::exception& e) {
      msg = e.what();
    }
    errors[j] = nullptr;
    skip[j] = 1;
    ++found;
    ++res.skipped;
    if (o.on_bad_input) o.on_bad_input(src.label(a + j), st, msg);
  }
  return found;
}

// Where decoded rows go, in order, whole runs a call: a new steps file, the
// end of the existing one, or shards. (p, bytes, ends, k): run j's rows are
// [ends[j], ends[j + 1]) of p (ends[0] == 0, ends[k] * 32 == bytes).
using RowSink = std::function<void(const uint8_t*, size_t, const uint64_t*, size_t)>;

// Decode every run of `src` and hand its rows to `out`, run ids from
// `first_id`, row numbers from `first_row`, extending `crc`.
//
// Each run's content digest is computed with its rows (dataset/digest.hpp)
// and checked with `dup`; once a duplicate is to be refused nothing more is
// handed to `out`, the rest is decoded to count them all, and the refusal is
// thrown at the end (the callers' error paths take back what was written).
StreamResult stream_rows(const RunSource& src, const RowSink& out, uint64_t first_id,
                         uint64_t first_row, uint32_t crc, const BuildOptions& o,
                         const char* crash_name, DupContext& dup) {
  const size_t n = src.count();
  if (first_id > (uint64_t{1} << 32) || n > (uint64_t{1} << 32) - first_id)
    fail(A2PACK_E_UNSUPPORTED, "{}: {} runs after run id {} exceed the u32 run_id of a row",
         src.input(), n, first_id);
  StreamResult res;
  res.crc = crc;
  res.runs.reserve(n);
  const unsigned workers = resolve_workers(o.workers);

  std::vector<std::vector<uint8_t>> scratch(kChunkRuns);
  std::vector<PayloadView> views(kChunkRuns);
  std::vector<run::Header> headers(kChunkRuns);
  std::vector<uint64_t> offs(kChunkRuns + 1);
  std::vector<uint8_t> rows;
  struct Cols {
    std::vector<uint64_t> boards;
    std::vector<uint8_t> moves;
    std::vector<float> values;
    std::vector<uint8_t> legal, present;
  };
  std::vector<Cols> cols(workers);
  std::vector<std::unique_ptr<RunHasher>> hashers(workers);
  std::vector<RunDigest> digests(kChunkRuns);
  // Failures are kept per run and the first in input order is reported, so
  // the error does not depend on thread timing.
  std::vector<std::exception_ptr> errors(kChunkRuns);
  uint64_t row = first_row;

  uint64_t next_id = first_id;
  std::vector<char> skip(kChunkRuns);
  std::vector<uint64_t> ids(kChunkRuns);
  for (size_t a = 0; a < n; a += kChunkRuns) {
    const size_t k = std::min(kChunkRuns, n - a);
    std::fill(skip.begin(), skip.end(), 0);
    // Read and parse headers in parallel (v1 CRCs are checked here).
    parallel_for(k, workers, [&](size_t j) {
      catch_into(errors[j], [&] {
        const size_t i = a + j;
        try {
          views[j] = src.payload(i, scratch[j]);
          headers[j] = run::parse_header(views[j].data, views[j].len);
        } catch (const Error& e) {
          rethrow_with_context(e, src.label(i));
        }
        if (headers[j].n_steps > kMaxRunSteps)
          fail(A2PACK_E_UNSUPPORTED,
               "{}: {} steps; a dataset row's step_index is a u16, so a run may have at most {} "
               "steps",
               src.label(i), headers[j].n_steps, kMaxRunSteps);
      });
    });
    take_failures(errors, k, a, skip, src, o, res);
    // Decode each kept run into per-worker columns, then into its rows. A run
    // skipped at this stage changes the ids and rows of those after it, so
    // the round is laid out again without it.
    for (;;) {
      offs[0] = 0;
      uint64_t id = next_id;
      for (size_t j = 0; j < k; ++j) {
        ids[j] = id;
        if (!skip[j]) ++id;
        offs[j + 1] = offs[j] + (skip[j] ? 0 : headers[j].n_steps);
      }
      rows.resize(offs[k] * kRowBytes);
      parallel_for_worker(k, workers, [&](unsigned w, size_t j) { catch_into(errors[j], [&] {
        if (skip[j]) return;
        const size_t i = a + j;
        const run::Header& h = headers[j];
        const size_t ns = h.n_steps;
        Cols& c = cols[w];
        if (c.boards.size() < ns || c.boards.empty()) {
          size_t cap = std::max<size_t>(ns, 1);
          c.boards.resize(cap);
          c.moves.resize(cap);
          c.values.resize(4 * cap);
          c.legal.resize(cap);
          c.present.resize(cap);
        }
        run::StepColumns sc{c.boards.data(), c.moves.data(), c.values.data(), c.legal.data(),
                            c.present.data()};
        try {
          run::decode_steps(views[j].data, views[j].len, h, sc);
        } catch (const Error& e) {
          rethrow_with_context(e, src.label(i));
        }
        if (!o.allow_missing_branches)
          for (size_t s = 0; s < ns; ++s)
            if (!c.present[s])
              fail(A2PACK_E_INVALID_ARGUMENT,
                   "{}: step {} has no branch values (the run was recorded without them), so its "
                   "ev_legal/ev_values are unknown; pass --allow-missing-branches to mark only "
                   "the chosen move legal, at 1.0",
                   src.label(i), s);
        Row* out_rows = reinterpret_cast<Row*>(rows.data()) + offs[j];
        const auto rid = static_cast<uint32_t>(ids[j]);
        for (size_t s = 0; s < ns; ++s)
          make_row(out_rows[s], c.boards[s], c.moves[s], &c.values[4 * s], c.legal[s],
                   c.present[s] != 0, rid, static_cast<uint16_t>(s));
        if (!hashers[w]) hashers[w] = std::make_unique<RunHasher>();
        digests[j] = hashers[w]->digest(meta_row(h.meta, ns),
                                        reinterpret_cast<const uint8_t*>(out_rows));
      }); });
      if (take_failures(errors, k, a, skip, src, o, res) == 0) break;
    }

    for (size_t j = 0; j < k; ++j)
      if (!skip[j])
        res.dup_of.push_back(dup.check.add(digests[j], static_cast<int64_t>(ids[j]), a + j));
    if (!dup.check.refusing()) {
      out(rows.data(), rows.size(), offs.data(), k);
      res.crc = crc32c::extend(res.crc, rows.data(), rows.size());
    }
    for (size_t j = 0; j < k; ++j) {
      if (skip[j]) continue;
      res.digests.push_back(digests[j]);
      const run::Meta& m = headers[j].meta;
      const std::string label = src.label(a + j);
      RunRow r;
      r.id = static_cast<int64_t>(ids[j]);
      r.first_step_idx = static_cast<int64_t>(row);
      r.num_steps = static_cast<int64_t>(headers[j].n_steps);
      r.max_score = to_sql_int(m.max_score, "max_score", label);
      r.highest_tile = m.highest_tile;
      r.engine = m.engine;
      r.start_time = to_sql_int(m.start_unix_s, "start_unix_s", label);
      r.elapsed_s = m.elapsed_s;
      res.runs.push_back(std::move(r));
      row += headers[j].n_steps;
      ++next_id;
    }
    res.rows += offs[k];
    // Large payloads are not kept between rounds.
    for (auto& s : scratch)
      if (s.capacity() > (4u << 20)) std::vector<uint8_t>().swap(s);
    if (o.progress && !o.progress(a + k, n))
      fail(A2PACK_E_INTERRUPTED, "stopped after {} of {} runs", a + k, n);
    crash_point(crash_name);
  }
  if (dup.check.refusing())
    fail(A2PACK_E_INVALID_ARGUMENT, "{}", dup.check.refusal(dup.where, res.runs.size(), dup.append));
  return res;
}

// Size and CRC32C of a file's bytes (metadata.db: tens of MB per million
// runs, read from the page cache at memory speed).
void file_crc(const std::string& path, uint64_t& bytes, uint32_t& crc) {
  MappedFile f(path, MappedFile::Advice::sequential);
  bytes = f.size();
  crc = crc32c::compute(f.data(), f.size());
}

// Record metadata.db as it is now (committed, and written or checked by
// a2pack) in the manifest about to be written.
void stamp_metadata(Manifest& m, const std::string& db_path) {
  file_crc(db_path, m.metadata_bytes, m.metadata_crc32c);
  m.has_metadata_stamp = true;
}

// Whether metadata.db is still the file the manifest's stamp records: then
// its indexes were checked (or written) by a2pack and need no new scan.
bool metadata_unchanged(const Manifest& m, const std::string& db_path) {
  if (!m.has_metadata_stamp || path_exists(db_path + "-wal")) return false;
  uint64_t bytes = 0;
  uint32_t crc = 0;
  file_crc(db_path, bytes, crc);
  return bytes == m.metadata_bytes && crc == m.metadata_crc32c;
}

void write_manifest(const std::string& dir, const Manifest& m, const char* crash_name) {
  TempFile t(dir + "/manifest.json");
  std::string text = to_json(m);
  t.write(text.data(), text.size());
  t.sync();
  crash_point(crash_name);
  t.install();
}

void require_dataset_files(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) fail_errno("open dataset", dir, errno);
  if (!S_ISDIR(st.st_mode)) fail(A2PACK_E_INVALID_ARGUMENT, "{}: not a dataset folder", dir);
  // A sharded dataset keeps its rows in the shards its manifest lists.
  const bool sharded = !path_exists(dir + "/steps.npy") && path_exists(dir + "/manifest.json") &&
                       read_manifest(dir)->sharded;
  for (const char* f : {"steps.npy", "metadata.db"})
    if (!(sharded && std::strcmp(f, "steps.npy") == 0))
    if (!path_exists(dir + "/" + f))
      fail(A2PACK_E_NOT_FOUND, "{}/{}: missing (a dataset holds steps.npy, metadata.db and "
           "manifest.json)", dir, f);
}

// Before an append or a repair writes anything: metadata.db is a file in
// the folder, not a link (SQLite would write into the file it points at,
// outside the dataset).
void require_db_not_linked(const std::string& dir) {
  const std::string db = dir + "/metadata.db";
  struct stat st;
  if (::lstat(db.c_str(), &st) != 0) fail_errno("stat", db, errno);
  if (S_ISLNK(st.st_mode))
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: is a symbolic link; a2pack writes a dataset's metadata.db only as a file in the "
         "dataset folder, never through a link into the file it points at. Nothing was "
         "changed; replace the link with a copy of its file to write to this dataset",
         db);
}

// Before an append writes anything: metadata.db is a file in the folder
// that this process may write, in a folder it may create files in (SQLite's
// metadata.db-journal, the append journal, temporary files). Checked with
// faccessat(AT_EACCESS), which also sees what stops root (a read-only
// mount, an immutable file), so that a dataset that cannot take the new
// runs fails here, naming the file, rather than after its rows were written.
void require_writable(const std::string& dir) {
  require_db_not_linked(dir);
  const std::string db = dir + "/metadata.db";
  if (::faccessat(AT_FDCWD, db.c_str(), W_OK, AT_EACCESS) != 0)
    fail_errno("not writable, so the new runs cannot be added to it (nothing was changed)", db,
               errno);
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
    fail_errno("folder not writable, so SQLite cannot create metadata.db-journal and a2pack "
               "cannot write its journal and temporary files there (nothing was changed)",
               dir, errno);
}

// Whether steps.npy can be extended or cut in place: a2pack's own header
// length (so the row count is patched without moving a byte of data), no
// other name for the file (a hard-linked copy, say a snapshot, must not
// change with it), steps.npy itself rather than a symbolic link to a file
// elsewhere, and a file this process may write (one made read-only keeps
// its bytes: the append writes a new file, as it does for the others).
bool extendable_in_place(const ReadFd& steps, const NpyInfo& info) {
  struct stat st;
  if (::fstat(steps.fd(), &st) != 0) fail_errno("stat", steps.path(), errno);
  struct stat lst;
  if (::lstat(steps.path().c_str(), &lst) != 0) fail_errno("stat", steps.path(), errno);
  return info.data_offset == npy_header_size() && st.st_nlink == 1 && S_ISREG(lst.st_mode) &&
         ::faccessat(AT_FDCWD, steps.path().c_str(), W_OK, AT_EACCESS) == 0;
}

// Cut the tail an interrupted in-place append left: the header's count back
// first (the journal, still present, claims the bytes past it), then the
// file's length, then fsync. A crash between the steps leaves a state the
// journal still explains.
void cut_own_tail(const std::string& steps_path, uint64_t data_offset, uint64_t rows) {
  ExtendFile f(steps_path);
  const std::string hdr = npy_header(rows);
  f.pwrite(hdr.data(), hdr.size(), 0);
  f.sync();
  f.truncate(data_offset + rows * kRowBytes);
  f.sync();
}

// Rewrite steps.npy with only its first `rows` rows (temporary file, rename).
void truncate_steps(const std::string& steps_path, const ReadFd& steps, const NpyInfo& info,
                    uint64_t rows) {
  TempFile t(steps_path);
  std::string hdr = npy_header(rows);
  t.write(hdr.data(), hdr.size());
  t.copy_from(steps.fd(), steps_path, info.data_offset, rows * kRowBytes);
  t.sync();
  t.install();
}

int64_t count_runs(Db& db, const char* where, int64_t a, int64_t b) {
  Stmt c = db.prepare(std::string("SELECT count(*) FROM runs WHERE ") + where);
  c.bind(1, a);
  if (b >= 0) c.bind(2, b);
  c.step();
  return c.col_int(0);
}

// The runs `where` selects, and their digests, in one transaction.
void delete_runs(Db& db, const char* where, int64_t a, int64_t b) {
  db.exec("BEGIN IMMEDIATE");
  const bool digests = has_digest_table(db);
  for (const char* table : {"runs", "run_digests"}) {
    if (!digests && std::strcmp(table, "run_digests") == 0) continue;
    Stmt d = db.prepare(std::string("DELETE FROM ") + table + " WHERE " + where);
    d.bind(1, a);
    if (b >= 0) d.bind(2, b);
    d.step();
  }
  db.exec("COMMIT");
}

std::string adopted_warning(const std::string& dir, const Unrecorded& u) {
  bool local = false;
  for (const auto& b : u.batches) local |= b.local_ids;
  return fmt::format(
      "{}: adopted {} that manifest.json did not record (written by another tool, such as "
      "upstream's `dataset append`); they are now part of the dataset{}",
      dir, u.describe(),
      local ? ". Their rows carry run-local run_ids (a known defect of upstream's append): "
              "`verify` lists them; select rows through metadata.db, not by the run_id column"
            : "");
}

std::string damaged_journal_removed(const Journal& j) {
  return fmt::format(
      "removed a damaged append journal ({}); it was taken as evidence of nothing, so nothing "
      "was undone on its word",
      j.damage);
}

// Shard files on disk past the manifest's list (indexes >= m.shards.size()),
// by index; named like shard_file_name() names them, nothing else.
std::vector<size_t> shards_past(const std::string& dir, const Manifest& m) {
  std::vector<size_t> out;
  for (const auto& name : list_dir(dir))
    if (auto i = shard_index(name); i && *i >= m.shards.size()) out.push_back(*i);
  std::sort(out.begin(), out.end());
  return out;
}

void remove_shard(const std::string& dir, size_t i) {
  const std::string path = dir + "/" + shard_file_name(i);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail_errno("remove", path, errno);
}

// recover_locked() for a sharded dataset. Only a2pack writes this layout, so
// content past the manifest is an interrupted append of a2pack's (its journal
// names the run ids and shard files) or unexplained, which is removed only
// when asked (discard_unrecorded) and otherwise refused, naming it.
Manifest recover_sharded(const std::string& dir, const Manifest& m, Db& db,
                         const RecoverOptions& ro, RecoverReport& rep) {
  auto j = read_journal(dir);
  if (j && j->damaged()) {
    // It cannot say whose the runs and shards past the manifest are: they
    // are kept (refused, as any unexplained content) unless dropping them
    // was asked for, and the journal goes only once nothing depends on it.
    const int64_t runs = count_runs(db, "id >= ?1", static_cast<int64_t>(m.next_run_id), -1);
    const size_t shards = shards_past(dir, m).size();
    if ((runs || shards) && !ro.discard_unrecorded)
      fail(A2PACK_E_CORRUPT,
           "{}; and {} holds {} runs with id >= {} in metadata.db and {} shard files past the "
           "manifest's {}, which a damaged journal cannot say are an interrupted append of "
           "a2pack's. Nothing was changed. To drop them run `a2pack dataset verify --repair "
           "--discard-unrecorded`",
           j->damage, dir, runs, m.next_run_id, shards, m.shards.size());
    remove_journal(dir);
    rep.actions.push_back(damaged_journal_removed(*j));
    j.reset();
  }
  if (j && j->describes_uncommitted(m)) {
    if (!j->sharded)
      fail(A2PACK_E_CORRUPT, "{}/{}: the journal of a steps.npy append in a sharded dataset", dir,
           kJournalName);
    const int64_t n = count_runs(db, "id >= ?1 AND id < ?2", static_cast<int64_t>(j->first_new_id),
                                 static_cast<int64_t>(j->end_new_id));
    if (n) {
      delete_runs(db, "id >= ?1 AND id < ?2", static_cast<int64_t>(j->first_new_id),
                  static_cast<int64_t>(j->end_new_id));
      rep.actions.push_back(fmt::format(
          "deleted {} uncommitted runs of an interrupted append from metadata.db", n));
    }
    size_t removed = 0;
    for (size_t i : shards_past(dir, m))
      if (i >= j->first_new_shard && i < j->end_new_shard) {
        remove_shard(dir, i);
        ++removed;
      }
    if (removed) {
      fsync_dir(dir);
      rep.actions.push_back(
          fmt::format("removed {} uncommitted shard files of an interrupted append", removed));
    }
  }
  if (j) {
    remove_journal(dir);
    rep.actions.push_back(j->describes_uncommitted(m)
                              ? "removed the journal of an interrupted append"
                              : "removed the journal of an append that had committed");
  }
  const int64_t extra_runs =
      count_runs(db, "id >= ?1", static_cast<int64_t>(m.next_run_id), -1);
  const std::vector<size_t> extra_shards = shards_past(dir, m);
  if (!extra_runs && extra_shards.empty()) return m;
  std::string what = fmt::format("{} runs with id >= {} in metadata.db and {} shard files past "
                                 "the manifest's {}",
                                 extra_runs, m.next_run_id, extra_shards.size(), m.shards.size());
  if (!ro.discard_unrecorded)
    fail(A2PACK_E_CORRUPT,
         "{}: holds {} that manifest.json does not record and no append journal explains. "
         "Nothing was changed. To drop them run `a2pack dataset verify --repair "
         "--discard-unrecorded`",
         dir, what);
  if (extra_runs) delete_runs(db, "id >= ?1", static_cast<int64_t>(m.next_run_id), -1);
  for (size_t i : extra_shards) remove_shard(dir, i);
  fsync_dir(dir);
  rep.actions.push_back("removed " + what + ", as asked");
  return m;
}

Manifest recover_locked(const std::string& dir, const RecoverOptions& ro, RecoverReport& rep) {
  for (const auto& name : list_dir(dir))
    if (is_temp_name(name)) {
      if (::unlink((dir + "/" + name).c_str()) != 0 && errno != ENOENT)
        fail_errno("remove", dir + "/" + name, errno);
      rep.actions.push_back("removed the leftover temporary file " + name);
    }
  const std::string db_path = dir + "/metadata.db";
  const std::string journal = db_path + "-journal";
  bool had_journal = path_exists(journal);
  auto m = read_manifest(dir);
  Db db(db_path, Db::Mode::read_write);
  check_schema(db);  // the first read rolls back a hot journal
  // Nothing is written into a damaged file: SQLite would write the zeroed
  // tail of a cut page back as if it were data. The index scan is skipped
  // when not asked for and the file is byte for byte the one a2pack
  // committed last (its CRC is read at memory speed; the scan walks every
  // run through SQLite, about 100 times slower).
  check_db_size(db);
  if (ro.check_indexes || !m || !metadata_unchanged(*m, db_path)) {
    check_db_indexes(db);
    if (has_digest_table(db)) check_db_indexes(db, "run_digests");
  }
  if (had_journal && !path_exists(journal))
    rep.actions.push_back("rolled back an interrupted metadata.db transaction");
  if (m && m->sharded) return recover_sharded(dir, *m, db, ro, rep);

  const std::string steps_path = dir + "/steps.npy";
  std::optional<ReadFd> steps(std::in_place, steps_path);
  auto j = m ? read_journal(dir) : std::nullopt;
  // A damaged journal may be all that is left of an in-place append whose
  // rows lie past the header's count: they are read as such a tail here, and
  // kept unless dropping them is asked for (below).
  NpyInfo info =
      read_npy_info(*steps, m && j && (j->owns_steps(*m, steps->fd()) || j->damaged()));
  if (!m) {
    if (path_exists(dir + "/" + kJournalName)) remove_journal(dir);
    // A dataset from the upstream tool: describe it in a manifest first, so
    // that the append protocol has a commit record to roll back to. (A
    // journal without a manifest is removed above: only an append writes
    // one, after a manifest exists.)
    Manifest empty;
    Unrecorded u = find_unrecorded(dir, empty, std::nullopt, info, *steps, db);
    if (u.foreign() && !u.adoptable())
      fail(A2PACK_E_CORRUPT, "{}: cannot describe the dataset (it has no manifest.json): {}", dir,
           u.problem);
    Manifest nm = adopt_into(empty, u, info, *steps, dir, "existing");
    nm.created_utc = nm.updated_utc = utc_now();
    nm.generator = generator_name();
    stamp_metadata(nm, db_path);
    write_manifest(dir, nm, "adopt:manifest-synced");
    rep.actions.push_back("wrote manifest.json for a dataset that had none");
    for (const auto& b : u.batches)
      if (b.local_ids)
        rep.warnings.push_back(fmt::format(
            "{}: runs {}..{} carry run-local run_ids in steps.npy (a known defect of upstream's "
            "`dataset append`); `verify` lists them",
            dir, b.first_run_id, b.end_run_id - 1));
    return nm;
  }
  if (info.rows < m->rows)
    fail(A2PACK_E_CORRUPT, "{}: holds {} rows, fewer than the {} that manifest.json records",
         steps_path, info.rows, m->rows);
  Unrecorded u = find_unrecorded(dir, *m, j, info, *steps, db);
  // a2pack's own interrupted append, as its journal describes it: undo it,
  // then remove the journal (a crash in between repeats this next time).
  if (u.own_pending) {
    if (u.own_runs) {
      delete_runs(db, "id >= ?1 AND id < ?2", static_cast<int64_t>(u.own_first_id),
                  static_cast<int64_t>(u.own_end_id));
      rep.actions.push_back(
          fmt::format("deleted {} uncommitted runs of an interrupted append from metadata.db",
                      u.own_runs));
    }
    if (u.own_tail && (info.rows > m->rows || info.tail_bytes)) {
      if (extendable_in_place(*steps, info))
        cut_own_tail(steps_path, info.data_offset, m->rows);
      else
        truncate_steps(steps_path, *steps, info, m->rows);
      rep.actions.push_back(fmt::format(
          "removed {} uncommitted rows of an interrupted append from the end of steps.npy",
          u.own_rows));
      steps.emplace(steps_path);
      info = read_npy_info(*steps);
    }
  }
  if (j && j->damaged()) {
    // Evidence of nothing (dataset/journal.hpp): what lies past the committed
    // state is handled as content a2pack did not write, kept when it can be
    // adopted, otherwise refused unless dropping it was asked for. Nothing
    // is changed before that is decided.
    const uint64_t tail = info.tail_bytes;
    if ((tail || (u.foreign() && !u.adoptable())) && !ro.discard_unrecorded) {
      std::string what = u.foreign() ? u.describe() : "";
      if (tail)
        what += fmt::format("{}{} bytes past the rows steps.npy's header counts",
                            what.empty() ? "" : " and ", tail);
      fail(A2PACK_E_CORRUPT,
           "{}; and {} holds {} past the committed state manifest.json records, which a "
           "damaged journal cannot say are an interrupted append of a2pack's{}. Nothing was "
           "changed. To drop them (the runs of metadata.db with id >= {} and the rows of "
           "steps.npy past row {}), run `a2pack dataset verify --repair --discard-unrecorded`",
           j->damage, dir, what, u.problem.empty() ? "" : " (" + u.problem + ")",
           m->next_run_id, m->rows);
    }
    if (tail) {
      if (extendable_in_place(*steps, info))
        cut_own_tail(steps_path, info.data_offset, m->rows);
      else
        truncate_steps(steps_path, *steps, info, m->rows);
      rep.actions.push_back(fmt::format(
          "removed {} bytes past the rows steps.npy's header counts (and any rows past row {}), "
          "as asked",
          tail, m->rows));
      steps.emplace(steps_path);
      info = read_npy_info(*steps);
      u = find_unrecorded(dir, *m, std::nullopt, info, *steps, db);
    }
    remove_journal(dir);
    rep.actions.push_back(damaged_journal_removed(*j));
  } else if (j) {
    remove_journal(dir);
    rep.actions.push_back(u.own_pending ? "removed the journal of an interrupted append"
                                        : "removed the journal of an append that had committed");
  }
  if (!u.foreign()) return *m;
  if (u.adoptable()) {
    Manifest nm = adopt_into(*m, u, info, *steps, "(not recorded: written by another tool)",
                             "adopted");
    nm.updated_utc = utc_now();
    nm.generator = generator_name();
    stamp_metadata(nm, db_path);
    write_manifest(dir, nm, "adopt:manifest-synced");
    rep.actions.push_back(fmt::format("recorded {} in manifest.json", u.describe()));
    rep.warnings.push_back(adopted_warning(dir, u));
    rep.adopted_runs = u.runs;
    return nm;
  }
  if (!ro.discard_unrecorded)
    fail(A2PACK_E_CORRUPT,
         "{}: holds {} that manifest.json does not record, and they cannot be adopted: {}. "
         "Nothing was changed. To drop them (the runs of metadata.db with id >= {} and the rows "
         "of steps.npy past row {}), run `a2pack dataset verify --repair --discard-unrecorded`; "
         "otherwise rebuild the dataset",
         dir, u.describe(), u.problem, m->next_run_id, m->rows);
  if (u.runs) {
    delete_runs(db, "id >= ?1", static_cast<int64_t>(m->next_run_id), -1);
    rep.actions.push_back(fmt::format("deleted {} unrecorded runs (ids {}..{}) from metadata.db, "
                                      "as asked",
                                      u.runs, u.min_id, u.max_id));
  }
  if (info.rows > m->rows) {
    truncate_steps(steps_path, *steps, info, m->rows);
    rep.actions.push_back(fmt::format(
        "removed {} unrecorded rows from the end of steps.npy, as asked", info.rows - m->rows));
  }
  return *m;
}

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

// Building and appending need a local folder (a temporary sibling renamed
// into place, a lock file, a journal): an object store has none of these.
void require_local(const std::string& dir) {
  if (is_remote_path(dir))
    fail(A2PACK_E_UNSUPPORTED,
         "{}: datasets are built and appended in a local folder; build one locally and upload its "
         "files (remote datasets are read-only)",
         dir);
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

namespace {

Journal start_journal(const Manifest& m, uint64_t new_runs, int steps_fd,
                      const std::string& steps_name, bool in_place) {
  Journal j = Journal::starting_from(m, new_runs);
  struct stat st;
  if (::fstat(steps_fd, &st) != 0) fail_errno("stat", steps_name, errno);
  j.steps_dev = static_cast<uint64_t>(st.st_dev);
  j.steps_ino = static_cast<uint64_t>(st.st_ino);
  j.in_place = in_place;
  return j;
}

void insert_new_runs(const std::string& dir, const StreamResult& res) {
  Db db(dir + "/metadata.db", Db::Mode::read_write);
  set_durable(db);
  db.exec("BEGIN IMMEDIATE");
  create_digest_table(db);  // present already unless another tool dropped it
  insert_runs(db, res.runs);
  insert_digests(db, res.runs, res.digests, res.dup_of);
  crash_point("append:db-inserted");
  db.exec("COMMIT");
  crash_point("append:db-committed");
}

// The append that writes a new steps file: a header, the committed rows
// (copy_file_range: file systems that share extents copy nothing; others
// copy every byte), the new rows; renamed over steps.npy after metadata.db
// has the new runs. Readers outside a2pack's lock keep the old file.
StreamResult append_by_copy(const RunSource& src, const std::string& dir, const Manifest& m,
                            const ReadFd& old, const NpyInfo& info, const BuildOptions& o,
                            DupContext& dup) {
  const std::string steps_path = dir + "/steps.npy";
  TempFile tmp(steps_path);
  std::string hdr = npy_header(0);
  tmp.write(hdr.data(), hdr.size());
  // Only the committed rows: a tail left by an interrupted append is dropped.
  tmp.copy_from(old.fd(), steps_path, info.data_offset, m.rows * kRowBytes);
  crash_point("append:old-rows-copied");
  StreamResult res = stream_rows(
      src, [&](const uint8_t* p, size_t n, const uint64_t*, size_t) { tmp.write(p, n); }, m.next_run_id, m.rows,
      m.steps_crc32c, o, "append:rows-partial", dup);
  hdr = npy_header(m.rows + res.rows);
  tmp.pwrite(hdr.data(), hdr.size(), 0);
  tmp.sync();
  crash_point("append:steps-synced");
  // From here on the append changes metadata.db and steps.npy: record first
  // what it is about to do, so that recovery undoes exactly this append and
  // nothing another tool wrote.
  write_journal(dir, start_journal(m, res.runs.size(), tmp.fd(), tmp.temp_path(), false));
  crash_point("append:journal-written");
  insert_new_runs(dir, res);
  tmp.install();
  crash_point("append:steps-installed");
  return res;
}

// The append that extends steps.npy where it is: it writes the new rows
// after the committed ones and, once metadata.db has their runs, patches the
// header's row count (a2pack's header has room for any count, so its length
// never changes). It writes the new rows and one header, nothing else.
//
// A journal comes first here, since steps.npy itself changes: one with no
// run ids, which claims whatever lies past the committed rows until the
// manifest commits, so that readers ignore a partly written tail (and accept
// the file's length past its header's count) and recovery cuts it off. Once
// the rows are durable it is rewritten with the run ids about to be inserted,
// as the copying append writes it: claiming ids only from then on keeps the
// window in which another tool's runs could take those ids as short.
StreamResult append_in_place(const RunSource& src, const std::string& dir, const Manifest& m,
                             const ReadFd& old, const NpyInfo& info, const BuildOptions& o,
                             DupContext& dup) {
  const std::string steps_path = dir + "/steps.npy";
  write_journal(dir, start_journal(m, 0, old.fd(), steps_path, true));
  crash_point("append:tail-claimed");
  ExtendFile f(steps_path);
  f.seek_end(info.data_offset + m.rows * kRowBytes);
  StreamResult res;
  try {
    res = stream_rows(
        src, [&](const uint8_t* p, size_t n, const uint64_t*, size_t) { f.write(p, n); }, m.next_run_id, m.rows,
        m.steps_crc32c, o, "append:rows-partial", dup);
    f.sync();
    crash_point("append:steps-synced");
    write_journal(dir, start_journal(m, res.runs.size(), old.fd(), steps_path, true));
  } catch (...) {
    // A bad run, a stop asked for, a full disk: nothing was committed, so
    // take the rows back now rather than leave them to the next append's
    // recovery (which does the same if this fails too).
    try {
      cut_own_tail(steps_path, info.data_offset, m.rows);
      remove_journal(dir);
    } catch (const Error&) {
    }
    throw;
  }
  crash_point("append:journal-written");
  insert_new_runs(dir, res);
  // The rows are durable before the header counts them.
  const std::string hdr = npy_header(m.rows + res.rows);
  f.pwrite(hdr.data(), hdr.size(), 0);
  f.sync();
  crash_point("append:steps-installed");
  return res;
}

// The rows and runs an append adds, recorded in the manifest it commits.
Manifest next_manifest(const Manifest& m, const RunSource& src, const StreamResult& res) {
  Manifest next = m;
  next.rows = m.rows + res.rows;
  next.runs += res.runs.size();
  next.next_run_id += res.runs.size();
  next.steps_crc32c = res.crc;
  next.updated_utc = utc_now();
  next.generator = generator_name();
  next.sources.push_back(
      {src.input(), src.kind(), res.runs.size(), res.rows, m.next_run_id, next.updated_utc});
  return next;
}

BuildResult commit_append(const std::string& dir, Manifest& next, const RecoverReport& rep,
                          const StreamResult& res, bool copied) {
  stamp_metadata(next, dir + "/metadata.db");
  write_manifest(dir, next, "append:manifest-synced");
  crash_point("append:committed");
  remove_journal(dir);
  BuildResult r;
  r.runs_added = res.runs.size();
  r.rows_added = res.rows;
  r.total_runs = next.runs;
  r.total_rows = next.rows;
  r.runs_adopted = rep.adopted_runs;
  r.runs_skipped = res.skipped;
  r.steps_copied = copied;
  r.runs_duplicated = res.duplicates();
  return r;
}

// A sharded dataset's append: the new runs go into new shard files (under
// temporary names until metadata.db has their runs), so it writes the new
// rows, their runs and a manifest, and never touches an existing shard.
BuildResult append_sharded(const RunSource& src, const std::string& dir, const Manifest& m,
                           const RecoverReport& rep, const BuildOptions& o, DupContext& dup) {
  const uint64_t shard_rows = o.shard_rows ? o.shard_rows : m.shard_rows;
  ShardWriter w(dir, m.shards.size(), m.rows, shard_rows ? shard_rows : 1);
  StreamResult res = stream_rows(
      src, [&](const uint8_t* p, size_t, const uint64_t* ends, size_t k) { w.put(p, ends, k); },
      m.next_run_id, m.rows, m.steps_crc32c, o, "append:rows-partial", dup);
  w.finish();
  crash_point("append:steps-synced");
  Journal j = Journal::starting_from(m, res.runs.size());
  j.sharded = true;
  j.first_new_shard = m.shards.size();
  j.end_new_shard = m.shards.size() + w.shards().size();
  write_journal(dir, j);
  crash_point("append:journal-written");
  insert_new_runs(dir, res);
  w.install();
  crash_point("append:steps-installed");
  Manifest next = next_manifest(m, src, res);
  next.shard_rows = shard_rows;
  next.shards.insert(next.shards.end(), w.shards().begin(), w.shards().end());
  return commit_append(dir, next, rep, res, false);
}

}  // namespace

BuildResult append(const RunSource& src, const std::string& dir_in, const BuildOptions& o) {
  require_local(dir_in);
  const std::string dir = strip_slashes(dir_in);
  require_dataset_files(dir);
  require_writable(dir);
  DirLock lock(dir, /*exclusive=*/true, o.lock_timeout_ms);
  RecoverReport rep;
  RecoverOptions ro;
  ro.check_indexes = false;  // unless metadata.db changed since a2pack committed it
  Manifest m = recover_locked(dir, ro, rep);
  if (o.on_note)
    for (const auto& a : rep.actions) o.on_note(a);
  if (o.on_warning)
    for (const auto& w : rep.warnings) o.on_warning(w);

  // Every committed run gets its digest first: the new runs are checked
  // against them. Nothing to do (and nothing read) while the manifest says
  // they are complete and metadata.db is the file it stamped. When
  // metadata.db changed since (a recovery deleted runs, another tool wrote
  // to it) the missing ones are computed from the rows. When the manifest
  // does not say so (a dataset written before digests existed, runs another
  // tool added, a manifest another a2pack version rewrote) every run's is
  // computed and checked: a writer that knows nothing of digests may have
  // reused the id of a run whose digest it left behind.
  const std::string db_path = dir + "/metadata.db";
  uint64_t recorded = 0;
  if (!m.run_digests || !metadata_unchanged(m, db_path)) {
    DigestRepair dr = record_digests(dir, m, /*recheck=*/!m.run_digests, o.workers);
    recorded = dr.added;
    if (o.on_note)
      for (const auto& a : dr.actions) o.on_note(a);
    m.run_digests = true;
    stamp_metadata(m, db_path);
    write_manifest(dir, m, "append:digests-recorded");
  }
  Db lookup_db(db_path, Db::Mode::read_only);
  DigestLookup lookup(lookup_db);
  DuplicateCheck check(&lookup, o.allow_duplicates, [&](size_t i) { return src.label(i); });
  DupContext dup{check, dir, true};

  if (m.sharded) {
    BuildResult r = append_sharded(src, dir, m, rep, o, dup);
    r.digests_recorded = recorded;
    return r;
  }
  if (o.shard_rows)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: shard_rows applies to a sharded dataset's append; this one keeps its rows in one "
         "steps.npy (build a sharded copy with `a2pack dataset build --shard-rows`)",
         dir);

  const std::string steps_path = dir + "/steps.npy";
  ReadFd old(steps_path);
  NpyInfo info = read_npy_info(old);
  // In place unless asked for a copy, or the file cannot take it: another
  // header length (a file numpy or another tool wrote with less room; the
  // copy writes a2pack's header, so later appends extend in place), another
  // name linked to it, or rows past the committed ones (recovery has made
  // them the committed ones or refused, so this is only a guard).
  const bool in_place = !o.copy_steps && info.rows == m.rows && extendable_in_place(old, info);
  StreamResult res = in_place ? append_in_place(src, dir, m, old, info, o, dup)
                              : append_by_copy(src, dir, m, old, info, o, dup);

  Manifest next = next_manifest(m, src, res);
  BuildResult r = commit_append(dir, next, rep, res, !in_place);
  r.digests_recorded = recorded;
  return r;
}

RecoverReport recover(const std::string& dir_in, const RecoverOptions& ro) {
  const std::string dir = strip_slashes(dir_in);
  require_dataset_files(dir);
  require_db_not_linked(dir);
  DirLock lock(dir, /*exclusive=*/true, ro.lock_timeout_ms);
  RecoverReport rep;
  Manifest m = recover_locked(dir, ro, rep);
  if (ro.record_digests) {
    DigestRepair dr = record_digests(dir, m, /*recheck=*/true, ro.workers);
    rep.actions.insert(rep.actions.end(), dr.actions.begin(), dr.actions.end());
    const std::string db_path = dir + "/metadata.db";
    if (dr.added || dr.replaced || dr.orphans || !m.run_digests ||
        !metadata_unchanged(m, db_path)) {
      m.run_digests = true;
      m.updated_utc = utc_now();
      m.generator = generator_name();
      stamp_metadata(m, db_path);
      write_manifest(dir, m, "repair:digests-recorded");
    }
  }
  return rep;
}

}  // namespace a2pack::dataset
