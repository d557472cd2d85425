// Appending runs to a dataset: in place (the new rows after the committed
// ones, the header's count patched last), by copy (a new steps file renamed
// over the old one), or as new shards; each journaled so that recovery undoes
// exactly an interrupted append, and committed by its manifest.
#include <sys/stat.h>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "dataset/builder.hpp"
#include "dataset/digest.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/journal.hpp"
#include "dataset/metadata.hpp"
#include "dataset/npy.hpp"
#include "dataset/row.hpp"
#include "dataset/row_stream.hpp"
#include "dataset/shards.hpp"
#include "dataset/writing.hpp"

namespace a2pack::dataset {

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

}  // namespace a2pack::dataset
