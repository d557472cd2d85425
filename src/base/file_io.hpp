// Files: whole-file reads, read-only memory maps, positional reads, and the
// atomic writer every format uses (temporary name, fsync, rename).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/fork_stamp.hpp"

namespace a2pack {

// Read a whole file. Errors name the path.
std::vector<uint8_t> read_file(const std::string& path);

// A read-only mapping of a whole file (empty files map to an empty view).
// Registered with base/mapped_guard.hpp: the library's reads of it inside
// guarded_read() raise an Error if the file shrinks, instead of SIGBUS.
class MappedFile {
 public:
  enum class Advice { normal, random, sequential };
  MappedFile() = default;
  explicit MappedFile(const std::string& path, Advice advice = Advice::normal);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  void advise(Advice advice, size_t offset = 0, size_t len = 0) const;

 private:
  void reset() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// open(2) for reading without ever blocking in open(): O_RDONLY | O_CLOEXEC |
// `extra_flags`, first with O_NONBLOCK (a FIFO or a device would otherwise
// wait in open() for a writer, or in read() for data, forever), then fstat.
// A regular file (or a folder: callers that want one, or report "is a
// folder" themselves) gets O_NONBLOCK cleared again and is returned; any
// other kind (FIFO, socket, character or block device) is closed and refused
// with A2PACK_E_INVALID_ARGUMENT naming the path and what it is. When open(2)
// itself fails, returns -1 with errno set, like open(2). Every reader of a
// named input opens it here (ReadFd and MappedFile do).
int open_for_reading(const std::string& path, int extra_flags = 0);

// A file descriptor opened read-only (open_for_reading), closed on destruction.
class ReadFd {
 public:
  explicit ReadFd(const std::string& path, int extra_flags = 0);
  ~ReadFd();
  ReadFd(ReadFd&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  ReadFd(const ReadFd&) = delete;
  ReadFd& operator=(const ReadFd&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  uint64_t size() const;
  // Read exactly len bytes at offset (retrying short reads); a read past the
  // end fails with A2PACK_E_CORRUPT naming the offset.
  void pread_exact(void* buf, size_t len, uint64_t offset) const;
  // One read of up to cap bytes from the start: the count read, which is
  // the whole file when it is below cap (a regular file reads short only
  // at its end). Saves the fstat of size() for files of a known bound.
  size_t read_head(void* buf, size_t cap) const;

 private:
  int fd_ = -1;
  std::string path_;
};

// Writes `path` atomically: data goes to "<path>.tmp-<pid>-<n>" in the same
// folder; commit() flushes, fsyncs, renames over `path` and fsyncs the folder.
// Destroying an uncommitted writer removes the temporary file, so a failed or
// interrupted write never leaves a file under the final name.
class BackgroundWriter;

// Bytes a new file can hand the page cache before the kernel starts to
// throttle writers to its writeback: halfway between the dirty background
// threshold and the dirty limit (vm.dirty_background_bytes / _ratio,
// vm.dirty_bytes / _ratio of the available memory), less what is dirty or
// under writeback now. 0 when /proc does not say.
uint64_t page_cache_write_room();

class AtomicFile {
 public:
  // With `background`, write() copies into large buffers that a thread of
  // this file writes in order (base/background_writer.hpp): for callers
  // whose own work per byte is comparable to the kernel's copy. Errors of
  // background writes surface in a later write(), flush() or commit().
  // With `direct` too, whole buffers bypass the page cache (O_DIRECT, where
  // the filesystem allows it): for large files written once.
  // `direct_from`: whole buffers at and past this offset always; before it,
  // those for which O_DIRECT measures faster (base/write_path.hpp).
  explicit AtomicFile(std::string path, bool background = false, bool direct = false,
                      uint64_t direct_from = 0);
  // Whether background writes still bypass the page cache.
  bool direct() const;
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t len);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Positional write into what was already written (for headers patched last).
  void pwrite(const void* data, size_t len, uint64_t offset);
  uint64_t bytes_written() const { return written_; }
  // Hand buffered bytes to the kernel (no fsync; the file keeps its
  // temporary name until commit()).
  void flush() { flush_buffer(); }
  // Flush, then rename into place. With `durable` (the default) the file is
  // fsync'ed before the rename and its folder after it, so the new name
  // survives a power cut; without, the rename still happens last (a crash
  // never leaves a partial file under the final name) but the bytes may be
  // lost with the page cache — what bagz's writer does, offered for parity.
  void commit(bool durable = true);
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }
  // The temporary file's descriptor (closed at commit).
  int fd() const { return fd_; }

 private:
  void flush_buffer();
  void check_owner() const;  // throws in a forked child
  std::string path_, tmp_;
  int fd_ = -1;
  std::unique_ptr<BackgroundWriter> bg_;
  ForkStamp owner_;  // a forked child may not write, commit or delete the file
  uint64_t written_ = 0;
  std::vector<uint8_t> buf_;
  bool committed_ = false;
};

// write(2) all of `len` bytes (retrying short writes and EINTR), in calls of
// at most 48 KiB (the page cache takes larger ones slower); errors name `path`.
void write_all(int fd, const void* data, size_t len, const std::string& path);
// The same with pwrite(2) at `offset` (the file position is left alone).
void pwrite_all(int fd, const void* data, size_t len, uint64_t offset, const std::string& path);

// A second descriptor with its own `flags` (O_DIRECT, O_RDONLY, ...) on the
// file open as `fd`, named `path`: never another file put under that name
// since (a link included). -1 with errno set when it cannot be had.
int reopen(int fd, int flags, const std::string& path);

// Write a whole file atomically.
void write_file_atomic(const std::string& path, const void* data, size_t len);

// fsync a folder so a rename or a new entry in it is durable.
void fsync_dir(const std::string& dir);

// Folder part of a path ("." when none).
std::string parent_dir(const std::string& path);

}  // namespace a2pack
