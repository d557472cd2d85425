// The folders a build works with beside its output DSDIR: the temporary
// folder it writes the new dataset in ("DSDIR.tmp-<pid>-<n>"), the previous
// dataset a replacing build swaps out (under that temporary name, or
// "DSDIR.old-<pid>-<n>" where the file system cannot exchange two names),
// and what is left of either when a build's process died.
//
// A folder beside DSDIR is a2pack's to delete only when all of these hold:
//   - its name is exactly "DSDIR.tmp-<pid>-<n>" or "DSDIR.old-<pid>-<n>"
//     (both numbers all digits), the names a build gives;
//   - it is a folder, not a link to one nor a file;
//   - process <pid> is gone and no process holds a lock on the folder (a
//     live build holds one, which covers a build in another PID namespace);
//   - it holds a2pack's marker file (kFolderMarker) naming the folder by
//     that very name: a build writes the marker into its temporary folder
//     first, and into the previous dataset just before it swaps it out;
//   - it holds nothing but files a dataset folder holds (no folder, no file
//     of another name).
// Anything else is left alone, a look-alike that fails only the last three
// with a note saying why.
#pragma once

#include <functional>
#include <string>

#include "dataset/fsutil.hpp"  // kFolderMarker

namespace a2pack::dataset {

using NoteFn = std::function<void(const std::string&)>;

// Whether `name` is a file a dataset folder holds: its three files, shards,
// SQLite's own files, the append journal, a2pack's temporary files and the
// marker.
bool is_dataset_file_name(const std::string& name);

// Write the marker into folder `dir`, naming the folder `as` (the name it
// has, or is about to get, when it is a leftover), durably.
void write_folder_marker(const std::string& dir, const std::string& as);

// Remove the marker from `dir` (a dataset just put in place), durably; no
// error when there is none.
void remove_folder_marker(const std::string& dir);

// Why folder `out` may not be replaced by a build ("" when it may): it is
// replaced only when empty, or when it holds nothing but dataset files and
// either an a2pack manifest (read and checked) or, without one, upstream's
// layout (steps.npy an NPY file, metadata.db an SQLite database).
std::string why_not_replaceable(const std::string& out);

// Remove the leftovers of dead builds of `out` (see above); `note` is told
// each folder removed and each look-alike left alone.
void clean_leftover_folders(const std::string& out, const NoteFn& note);

// Remove folder `dir` that this build made or swapped out (its process
// holds the lock): the dataset files in it, then the folder. Returns "" or
// why it was left (a file of another name, a folder inside, an error).
std::string remove_build_folder(const std::string& dir);

// A build's temporary folder "<out>.tmp-<pid>-<n>": made (0777 less the
// umask: it becomes the dataset), marked, and locked for as long as this
// object holds it. Destroyed without release(), it is removed.
class TempFolder {
 public:
  explicit TempFolder(const std::string& out);
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  const std::string& path() const { return path_; }
  // The folder was renamed into place: keep it, and let go of its lock.
  void release();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace a2pack::dataset
