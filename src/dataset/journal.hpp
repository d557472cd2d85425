// The append journal: a2pack's own record of an append in progress.
//
// An append writes DIR/append-journal.json (fsynced, renamed into place)
// before it changes metadata.db, and removes it after the manifest commit.
// It is the only evidence a2pack uses to call content beyond the manifest
// "ours and uncommitted": rows or runs the manifest does not record and no
// journal explains were written by someone else (upstream's `dataset append`
// updates steps.npy and metadata.db but not the manifest) and are never
// deleted as if they were an interrupted append (dataset/foreign.hpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "dataset/manifest.hpp"

namespace a2pack::dataset {

inline constexpr const char* kJournalName = "append-journal.json";

struct Journal {
  long pid = 0;
  std::string started_utc;
  // The manifest the append started from (the committed state it may roll
  // back to): its counts, CRC and number of sources.
  uint64_t old_rows = 0, old_runs = 0, old_next_run_id = 0, old_sources = 0;
  uint32_t old_crc = 0;
  // The run ids the append inserts into metadata.db: [first_new_id, end_new_id).
  uint64_t first_new_id = 0, end_new_id = 0;
  // The steps file the append writes (device and inode): when steps.npy is
  // this file, the rows past old_rows are the append's. For an append that
  // writes a new file this is the new file (steps.npy once it is renamed into
  // place); for one that extends steps.npy in place, steps.npy itself, whose
  // bytes past old_rows may then be a partly written tail.
  uint64_t steps_dev = 0, steps_ino = 0;
  bool in_place = false;
  // A sharded dataset's append: it writes the shard files with indexes
  // [first_new_shard, end_new_shard) (named as shard_file_name() names them),
  // which recovery removes while the append has not committed. JSON
  // "new_shards": [first, end]; absent for a steps.npy append.
  bool sharded = false;
  uint64_t first_new_shard = 0, end_new_shard = 0;
  // Non-empty: the file is there but is not a journal a2pack wrote, or
  // cannot be read as one (damaged JSON, missing keys, a link): what is
  // wrong, naming the file. Such a journal is evidence of nothing: it
  // claims no runs, rows or shards (describes_uncommitted() and
  // owns_steps() are false), so nothing is hidden or undone on its word;
  // recovery removes it (docs/dataset.md, "A damaged journal").
  std::string damage;
  bool damaged() const { return !damage.empty(); }

  // Whether `m` is still the manifest the append started from (the append
  // did not commit); a committed append's journal is only a leftover.
  // The journal of an append that starts from the committed manifest `m` and
  // inserts `new_runs` runs (ids from m.next_run_id); pid and start time set
  // here, the steps file's identity left to the caller.
  static Journal starting_from(const Manifest& m, uint64_t new_runs);

  bool describes_uncommitted(const Manifest& m) const;
  // Whether the open file `fd` is the steps file of this uncommitted append
  // (so that what lies past m.rows in it is the append's).
  bool owns_steps(const Manifest& m, int fd) const;
};

// Write the journal durably (temporary name, fsync, rename, fsync the folder).
void write_journal(const std::string& dir, const Journal& j);
// nullopt when there is none; a journal with `damage` set when the file
// cannot be read as one (errors reading it otherwise name the file).
std::optional<Journal> read_journal(const std::string& dir);
// Remove it and fsync the folder (no error when it is already gone).
void remove_journal(const std::string& dir);

}  // namespace a2pack::dataset
