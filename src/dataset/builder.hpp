// Writing datasets: build a new one, append runs to one, and bring one back to
// its committed state after an interrupted append.
//
// Commit protocol (docs/dataset.md has the full argument). manifest.json is
// the commit record: the committed dataset is the first manifest.rows rows of
// steps.npy and the runs with id < manifest.next_run_id. An append
//   1. writes the new steps file (old rows copied + new rows) under a
//      temporary name and fsyncs it,
//   2. inserts the new runs (ids >= next_run_id) in one SQLite transaction,
//   3. renames the new steps file over steps.npy,
//   4. writes the new manifest (temporary name, fsync, rename) — the commit.
// A crash before 4 leaves the old manifest, which still describes the old
// content exactly: the old rows are a prefix of any steps.npy that step 3 may
// have installed (checked by the manifest's CRC), and runs beyond
// next_run_id are ignored by readers and deleted by recover().
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "a2pack.h"

#include "dataset/manifest.hpp"
#include "dataset/metadata.hpp"
#include "dataset/source.hpp"

namespace a2pack::dataset {

// (done, total) runs; return false to stop (then Error INTERRUPTED).
using ProgressFn = std::function<bool(uint64_t, uint64_t)>;

struct BuildOptions {
  uint32_t workers = 0;               // decode threads, 0 = all cores
  bool allow_missing_branches = false;
  bool overwrite = false;             // build: replace an existing dataset folder
  ProgressFn progress;
  // append: told what the append found and kept that it did not write
  // (content adopted from another tool), before it adds anything.
  std::function<void(const std::string&)> on_warning;
  // Told what a build or an append did besides its work, one line each:
  // build, the folders of builds that died that it removed (and look-alikes
  // it left alone, saying why: dataset/build_dir.hpp); append, what its
  // recovery did first (an interrupted append undone, leftovers removed).
  std::function<void(const std::string&)> on_note;
  // Skip runs that cannot be read or decoded (told to on_bad_input with the
  // run's label, status and message) instead of failing.
  bool skip_bad = false;
  std::function<void(const std::string&, a2pack_status, const std::string&)> on_bad_input;
  // How long an append (or a replacing build) waits for the folder's lock:
  // < 0 forever, 0 not at all.
  int64_t lock_timeout_ms = 60000;
  // append: write a new steps.npy (the committed rows copied, then renamed
  // into place) instead of extending it in place. Costs a copy of the whole
  // file (none on file systems that share extents); for folders that other
  // programs read without a2pack's lock (np.load, upstream's tools) while
  // appends run, which then keep reading the old file.
  bool copy_steps = false;
  // build: write the sharded layout (docs/dataset.md), shards of whole runs
  // of at most this many rows (a longer run gets a shard of its own); 0 (the
  // default) writes one steps.npy. append to a sharded dataset: the size of
  // the new shards (0: the dataset's own); an append adds shards and never
  // rewrites one. Not for a single-file dataset's append.
  uint64_t shard_rows = 0;
  // Write runs whose content digest (dataset/digest.hpp) matches a run the
  // dataset holds or another run of the same build or append; each copy is
  // recorded as one (run_digests.duplicate_of). Otherwise (the default) such
  // a write is refused with INVALID_ARGUMENT, saying how many and which,
  // and nothing is changed.
  bool allow_duplicates = false;
};

struct BuildResult {
  uint64_t runs_added = 0;
  uint64_t rows_added = 0;
  uint64_t total_runs = 0;
  uint64_t total_rows = 0;
  uint64_t runs_skipped = 0;  // skip_bad
  uint64_t runs_adopted = 0;  // foreign runs recorded by this append
  bool steps_copied = false;  // append: steps.npy was rewritten rather than extended
  uint64_t runs_duplicated = 0;  // allow_duplicates: runs written that repeat another
  uint64_t digests_recorded = 0;  // append: digests computed first for runs that had none
};

// Build `out_dir` from `src`, atomically: everything is written into a sibling
// folder "<out_dir>.tmp-<pid>-<n>" which then replaces out_dir (renameat2
// RENAME_EXCHANGE when out_dir exists and `overwrite` is set; out_dir must
// then be empty or a dataset, dataset/build_dir.hpp). On any error the
// temporary folder is removed and out_dir is untouched. Leftover folders of
// builds of out_dir that died are removed first (on_note is told).
BuildResult build(const RunSource& src, const std::string& out_dir, const BuildOptions& opts);

// Build `out_dir` as `build` does, from rows and runs computed elsewhere (by
// distributed workers): `rows` holds n_rows 32-byte rows, run i's num_steps
// rows in turn with run_id i and step_index 0, 1, ... (checked: a mismatch is
// INVALID_ARGUMENT naming the row); `runs[i]` is run i's metadata.db row (its
// id and first_step_idx are set here). `input` and `kind` are the manifest's
// source. Same files, byte for byte, as `build` of the same runs.
BuildResult build_from_rows(const uint8_t* rows, uint64_t n_rows, std::vector<RunRow> runs,
                            const std::string& input, const std::string& kind,
                            const std::string& out_dir, const BuildOptions& opts);

// Append the runs of `src` to the dataset in `dir` (see the protocol above).
// Takes an exclusive lock on the folder; runs recover() first. A dataset the
// upstream tool wrote (no manifest) is first given a manifest describing it.
BuildResult append(const RunSource& src, const std::string& dir, const BuildOptions& opts);

// What recover() did, as human-readable lines; warnings name content it kept
// that a2pack did not write.
struct RecoverReport {
  std::vector<std::string> actions, warnings;
  uint64_t adopted_runs = 0;
};

struct RecoverOptions {
  // Content the manifest does not record, no append journal explains, and
  // that cannot be adopted (dataset/foreign.hpp) is deleted only when asked
  // (`verify --repair --discard-unrecorded`); otherwise recovery refuses.
  bool discard_unrecorded = false;
  int64_t lock_timeout_ms = 60000;  // as BuildOptions
  // Compare metadata.db's indexes with its runs table (a scan of every run:
  // dataset/db_check.hpp) even when the file is still the one a2pack
  // committed last (the manifest's metadata_db stamp). `verify --repair`
  // does; an append does not, so that it costs what its new runs cost.
  bool check_indexes = true;
  // Then recompute every committed run's content digest from its rows and
  // record those missing or wrong in metadata.db (`verify --repair`).
  bool record_digests = false;
  uint32_t workers = 0;  // threads hashing the rows for record_digests, 0 = all cores
};

// Under an exclusive lock: remove temporary files an interrupted writer left,
// let SQLite roll back a hot journal, undo a2pack's own interrupted append
// (the runs and rows its journal names, nothing else), and adopt consistent
// content another tool appended (the manifest rewritten to record it, with a
// warning) or refuse, naming the mismatch. A dataset without a manifest gets
// one (when its files agree).
RecoverReport recover(const std::string& dir, const RecoverOptions& ro);

}  // namespace a2pack::dataset
