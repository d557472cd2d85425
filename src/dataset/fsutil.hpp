// File-system pieces of the dataset commit protocol: a temporary file whose
// fsync and rename are separate steps (an append fsyncs the new steps file,
// commits SQLite, and only then renames it), folder locks, test crash points.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace a2pack::dataset {

// "<final>.tmp-<pid>-<n>" in the same folder; removed on destruction unless
// installed.
class TempFile {
 public:
  explicit TempFile(std::string final_path);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, size_t len);
  void pwrite(const void* data, size_t len, uint64_t offset);
  // Append `len` bytes of `src_fd` from `offset` (copy_file_range, which
  // shares extents on file systems that can, else read and write).
  void copy_from(int src_fd, const std::string& src_path, uint64_t offset, uint64_t len);
  uint64_t size() const { return size_; }
  void sync();
  // Rename over the final path and fsync the folder.
  void install();
  const std::string& temp_path() const { return tmp_; }
  int fd() const { return fd_; }

 private:
  std::string final_, tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool installed_ = false;
};

// An existing file extended in place (steps.npy by an append that does not
// copy it): writes go past its current end or over its header; nothing is
// renamed. Opened O_WRONLY without following a symlink; the caller has
// checked that it is a regular file (ReadFd) and that no other name links it.
class ExtendFile {
 public:
  explicit ExtendFile(std::string path);
  ~ExtendFile();
  ExtendFile(const ExtendFile&) = delete;
  ExtendFile& operator=(const ExtendFile&) = delete;

  // Write at the current end (starting at `size`, given by the caller: the
  // end of the committed rows, not a tail an interrupted append left).
  void seek_end(uint64_t size) { end_ = size; }
  void write(const void* data, size_t len);
  void pwrite(const void* data, size_t len, uint64_t offset);
  void truncate(uint64_t size);
  void sync();

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t end_ = 0;
};

// An flock() on a folder: shared for readers while they load, exclusive for
// an append or a replacing build. Released on destruction.
//
// flock() alone lets readers starve a writer: with a few readers re-opening
// in a loop, some shared lock is nearly always held and an exclusive request
// never finds the folder free. So both sides first pass a gate, an exclusive
// flock() on steps.npy (a file every dataset has; its inode changes when an
// append installs a new one, which is harmless: the writer then holds the
// folder itself). A reader holds the gate only while it takes its shared
// lock; a writer holds it while it waits for the readers that are already
// loading, so no new reader gets in ahead of it, and until it is done.
class DirLock {
 public:
  // timeout_ms: < 0 wait as long as it takes, 0 fail at once. A timeout fails
  // with A2PACK_E_IO naming the folder and the processes holding the lock.
  DirLock(const std::string& dir, bool exclusive, int64_t timeout_ms);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
  int gate_ = -1;
};

// "pid 123 (this process), pid 456": the processes holding an flock() on
// `path` (from /proc/locks), or "" when none can be named.
std::string lock_holders(const std::string& path);

// For the crash tests only: when the environment variable
// A2PACK_TEST_CRASH_AT equals `name`, end the process at once with _exit(86),
// as a power cut or SIGKILL would at that point (no destructors, no cleanup).
void crash_point(const char* name);
inline constexpr int kCrashExitCode = 86;

// The file a build writes into the folders it may leave behind
// (dataset/build_dir.hpp), marking them as a2pack's. A dataset that still
// holds one (a build was cut off between putting the folder in place and
// removing its marker) has it noted as a leftover temporary file, and the
// next append or `verify --repair` removes it.
inline constexpr const char* kFolderMarker = "a2pack-temp-folder";

// Temporary files the dataset writers create inside a dataset folder (and
// the marker above); what a crash can leave behind.
bool is_temp_name(const std::string& name);

// Names in a folder (no "." or ".."), sorted.
std::vector<std::string> list_dir(const std::string& dir);

// Whether a process with this id exists.
bool process_alive(long pid);

// Path without trailing slashes ("a/b/" -> "a/b"; "/" stays).
std::string strip_slashes(std::string p);

}  // namespace a2pack::dataset
