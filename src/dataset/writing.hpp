// What building, appending and repairing a dataset share: the checks made
// before anything is written, the manifest each commits (with the stamp of
// the metadata.db it committed), cutting steps.npy back to its committed
// rows, and the recovery an append runs first. Internal to dataset/.
#pragma once

#include <cstdint>
#include <string>

#include "base/file_io.hpp"
#include "dataset/builder.hpp"
#include "dataset/manifest.hpp"
#include "dataset/npy.hpp"

namespace a2pack::dataset {

// Whether `p` names anything (a dangling link included).
bool path_exists(const std::string& p);

// "a2pack <version>": the manifest's generator.
std::string generator_name();

// Record metadata.db as it is now (committed, and written or checked by
// a2pack) in the manifest about to be written.
void stamp_metadata(Manifest& m, const std::string& db_path);

// Whether metadata.db is still the file the manifest's stamp records: then
// its indexes were checked (or written) by a2pack and need no new scan.
bool metadata_unchanged(const Manifest& m, const std::string& db_path);

// Commit `m` as dir/manifest.json: a synced temporary file renamed over it
// (`crash_name` is the crash point between the two, for the tests).
void write_manifest(const std::string& dir, const Manifest& m, const char* crash_name);

// NOT_FOUND, naming it, unless `dir` is a folder holding a dataset's files
// (steps.npy, or the shards its manifest lists, and metadata.db).
void require_dataset_files(const std::string& dir);

// Before an append or a repair writes anything: metadata.db is a file in
// the folder, not a link (SQLite would write into the file it points at,
// outside the dataset).
void require_db_not_linked(const std::string& dir);

// Before an append writes anything: metadata.db is a file in the folder
// that this process may write, in a folder it may create files in (SQLite's
// metadata.db-journal, the append journal, temporary files). Checked with
// faccessat(AT_EACCESS), which also sees what stops root (a read-only
// mount, an immutable file), so that a dataset that cannot take the new
// runs fails here, naming the file, rather than after its rows were written.
void require_writable(const std::string& dir);

// Building and appending need a local folder (a temporary sibling renamed
// into place, a lock file, a journal): an object store has none of these.
void require_local(const std::string& dir);

// Whether steps.npy can be extended or cut in place: a2pack's own header
// length (so the row count is patched without moving a byte of data), no
// other name for the file (a hard-linked copy, say a snapshot, must not
// change with it), steps.npy itself rather than a symbolic link to a file
// elsewhere, and a file this process may write (one made read-only keeps
// its bytes: the append writes a new file, as it does for the others).
bool extendable_in_place(const ReadFd& steps, const NpyInfo& info);

// Cut the tail an interrupted in-place append left: the header's count back
// first (the journal, still present, claims the bytes past it), then the
// file's length, then fsync. A crash between the steps leaves a state the
// journal still explains.
void cut_own_tail(const std::string& steps_path, uint64_t data_offset, uint64_t rows);

// Rewrite steps.npy with only its first `rows` rows (temporary file, rename).
void truncate_steps(const std::string& steps_path, const ReadFd& steps, const NpyInfo& info,
                    uint64_t rows);

// Bring the dataset in `dir` (its lock held) back to its last committed
// state, or describe one the upstream tool wrote: undo a2pack's own
// interrupted append, adopt what another tool appended when it can be, and
// refuse (or, asked, drop) what can be neither. Returns the manifest now in
// place; what was done goes to `rep`.
Manifest recover_locked(const std::string& dir, const RecoverOptions& ro, RecoverReport& rep);

}  // namespace a2pack::dataset
