// Repairing a dataset: what an interrupted append of a2pack's left is
// undone as its journal describes, what another tool appended is adopted
// when it can be, and anything else is refused unless dropping it is asked
// for. `append` runs the same recovery first.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "dataset/builder.hpp"
#include "dataset/db_check.hpp"
#include "dataset/digest.hpp"
#include "dataset/foreign.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/journal.hpp"
#include "dataset/metadata.hpp"
#include "dataset/npy.hpp"
#include "dataset/shards.hpp"
#include "dataset/writing.hpp"

namespace a2pack::dataset {

namespace {

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

}  // namespace

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
