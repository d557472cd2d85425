#include "base/file_io.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/background_writer.hpp"
#include "base/error.hpp"
#include "base/mapped_guard.hpp"

namespace a2pack {

namespace {
std::atomic<uint64_t> g_tmp_counter{0};
constexpr size_t kWriteBuffer = 1 << 20;
// Writes from this size up skip the buffer: the kernel copies them straight
// from the caller's memory (still in cache when the caller just built it),
// cheaper than a copy into the buffer first (measured on 48 KiB bag records).
constexpr size_t kDirectWrite = 32u << 10;
// Taken temporary names skipped before giving up: enough for any leftovers
// of this pid, few enough that a folder full of planted names ends in an error.
constexpr int kTempTries = 1000;
}  // namespace

std::vector<uint8_t> read_file(const std::string& path) {
  ReadFd f(path);
  uint64_t size = f.size();
  std::vector<uint8_t> out(size);
  if (size) f.pread_exact(out.data(), size, 0);
  return out;
}

std::string parent_dir(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_errno("open folder", dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some filesystems refuse fsync on folders; that is not a data loss.
  if (rc != 0 && err != EINVAL && err != EROFS) fail_errno("fsync folder", dir, err);
}

// ---------------------------------------------------------------- ReadFd
namespace {
const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}
}  // namespace

int open_for_reading(const std::string& path, int extra_flags) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra_flags);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail_errno("stat", path, err);
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: is {}, not a regular file: refusing to read it", path,
         file_kind(st.st_mode));
  }
  // Reads of a regular file never block anyway; clear the flag so the
  // descriptor behaves exactly as a plain open(2)'s would (unless asked for).
  if (!(extra_flags & O_NONBLOCK)) {
    int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  }
  return fd;
}

ReadFd::ReadFd(const std::string& path, int extra_flags) : path_(path) {
  fd_ = open_for_reading(path, extra_flags);
  if (fd_ < 0) fail_errno("open", path, errno);
}
ReadFd::~ReadFd() {
  if (fd_ >= 0) ::close(fd_);
}
uint64_t ReadFd::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) fail_errno("stat", path_, errno);
  if (S_ISDIR(st.st_mode)) fail(A2PACK_E_INVALID_ARGUMENT, "{}: is a folder, not a file", path_);
  return static_cast<uint64_t>(st.st_size);
}
void ReadFd::pread_exact(void* buf, size_t len, uint64_t offset) const {
  auto* p = static_cast<uint8_t*>(buf);
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd_, p + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno(fmt::format("read {} bytes at offset {}", len, offset), path_, errno);
    }
    if (n == 0)
      fail(A2PACK_E_CORRUPT, "{}: unexpected end of file at offset {} (wanted {} bytes at {})",
           path_, offset + done, len, offset);
    done += static_cast<size_t>(n);
  }
}

size_t ReadFd::read_head(void* buf, size_t cap) const {
  for (;;) {
    ssize_t n = ::pread(fd_, buf, cap, 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EISDIR) fail(A2PACK_E_INVALID_ARGUMENT, "{}: is a folder, not a file", path_);
    fail_errno(fmt::format("read {} bytes at offset 0", cap), path_, errno);
  }
}

// ---------------------------------------------------------------- MappedFile
MappedFile::MappedFile(const std::string& path, Advice advice) : path_(path) {
  ReadFd f(path);
  uint64_t size = f.size();
  if (size == 0) return;
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd(), 0);
  if (p == MAP_FAILED) fail_errno("mmap", path, errno);
  try {
    register_mapping(p, size, path, f.fd());  // reads under a guard raise if the file shrinks
  } catch (...) {
    ::munmap(p, size);
    throw;
  }
  data_ = static_cast<const uint8_t*>(p);
  size_ = size;
  if (advice != Advice::normal) this->advise(advice);
}
MappedFile::~MappedFile() { reset(); }
MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}
MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    path_ = std::move(o.path_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}
void MappedFile::reset() noexcept {
  if (data_) {
    unregister_mapping(data_);
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  data_ = nullptr;
  size_ = 0;
}
void MappedFile::advise(Advice advice, size_t offset, size_t len) const {
  if (!data_) return;
  int a = advice == Advice::random ? MADV_RANDOM
          : advice == Advice::sequential ? MADV_SEQUENTIAL : MADV_NORMAL;
  size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t start = offset / page * page;
  size_t end = len ? offset + len : size_;
  if (end > size_) end = size_;
  if (end <= start) return;
  ::madvise(const_cast<uint8_t*>(data_) + start, end - start, a);  // a hint: failure is harmless
}

// ---------------------------------------------------------------- AtomicFile
namespace {

// The first number in a small /proc file, or -1.
int64_t proc_number(const char* path) {
  char buf[64];
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char* end = nullptr;
  long long v = std::strtoll(buf, &end, 10);
  return end == buf ? -1 : static_cast<int64_t>(v);
}

}  // namespace

uint64_t page_cache_write_room() {
  // /proc/meminfo lines: "Name:   <kB> kB".
  int64_t available = -1, dirty = -1, writeback = -1;
  if (FILE* f = std::fopen("/proc/meminfo", "re")) {
    char name[64];
    long long kb;
    while (std::fscanf(f, "%63s %lld kB\n", name, &kb) == 2) {
      if (std::strcmp(name, "MemAvailable:") == 0) available = kb << 10;
      else if (std::strcmp(name, "Dirty:") == 0) dirty = kb << 10;
      else if (std::strcmp(name, "Writeback:") == 0) writeback = kb << 10;
    }
    std::fclose(f);
  }
  if (available < 0 || dirty < 0 || writeback < 0) return 0;
  // A threshold in bytes, or else as a ratio of the available memory.
  auto threshold = [&](const char* bytes, const char* ratio) -> int64_t {
    if (int64_t b = proc_number(bytes); b > 0) return b;
    const int64_t r = proc_number(ratio);
    return r > 0 ? available / 100 * r : -1;
  };
  const int64_t background = threshold("/proc/sys/vm/dirty_background_bytes",
                                       "/proc/sys/vm/dirty_background_ratio");
  const int64_t limit = threshold("/proc/sys/vm/dirty_bytes", "/proc/sys/vm/dirty_ratio");
  if (background < 0 || limit < 0) return 0;
  // The kernel lets writers dirty pages unthrottled up to halfway between
  // the two thresholds (its "freerun" point).
  const int64_t room = (background + limit) / 2 - dirty - writeback;
  return room > 0 ? static_cast<uint64_t>(room) : 0;
}

AtomicFile::AtomicFile(std::string path, bool background, bool direct, uint64_t direct_from)
    : path_(std::move(path)) {
  // O_EXCL | O_NOFOLLOW: a name already taken - a leftover, or a link
  // planted by someone who can write into the folder and guess the names -
  // is never opened (following a link would overwrite or create its target
  // anywhere): the next counter is tried instead.
  for (int tries = 0;; ++tries) {
    tmp_ = fmt::format("{}.tmp-{}-{}", path_, ::getpid(), g_tmp_counter.fetch_add(1));
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ >= 0) break;
    if (errno == EINTR) continue;
    if (errno != EEXIST) fail_errno("create", tmp_, errno);
    if (tries + 1 == kTempTries)
      fail(A2PACK_E_IO,
           "{}: cannot create a temporary file: {} names up to {} are all taken (files or links "
           "someone else made there)",
           path_, kTempTries, tmp_);
  }
  // Held until the descriptor closes (or the process dies): tells cleaners
  // (base/stale_temps.hpp) that a live writer still owns this temporary.
  // A filesystem without flock just leaves the pid check.
  (void)::flock(fd_, LOCK_EX | LOCK_NB);
  try {
    if (background) bg_ = std::make_unique<BackgroundWriter>(fd_, tmp_, direct, direct_from);
    else buf_.reserve(kWriteBuffer);
  } catch (...) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
    throw;
  }
}
AtomicFile::~AtomicFile() {
  if (owner_.forked()) {
    // A forked child's copy (e.g. a Python object finalised in a worker
    // process): the temporary file is the parent's to finish or remove,
    // and the writer thread does not exist here (joining it would fail):
    // keep the parent's file, leak the writer's memory.
    (void)bg_.release();
    if (fd_ >= 0) ::close(fd_);
    return;
  }
  if (bg_ && !committed_) bg_->discard();  // about to be deleted: skip what is queued
  bg_.reset();  // its thread writes to fd_: stop it first
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}
namespace {
// Every write(2)/pwrite(2) call here is at most 48 KiB: the page cache
// takes large calls slower. On this project's VMs (Linux 6.18, ext4),
// writing 4.8 GB into the page cache in 1 MiB calls ran at 0.7-1.2 GB/s,
// 78 % of it in the
// kernel's copy into the cache's new pages (large folios, whose memory the
// host had to fault back in), where 48 KiB calls ran at 1.8-3.0 GB/s in the
// same minutes. Sizes that are not a power of two keep the folios small:
// 24, 40, 56 and 112 KiB calls ran at 2.3-3.9 GB/s, 8, 16, 32 and 64 KiB
// ones at 1.0-1.9. bagz's writes (4 KiB, then the rest of each 48 KiB
// record) fall in the fast group too. The extra calls cost ~1 us per piece.
constexpr size_t kPageCachePiece = 48 << 10;

// Both loops: `put(p, n, done)` is one write(2) or pwrite(2) call.
template <typename Put>
void put_all(const void* data, size_t len, const std::string& path, Put put) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < len) {
    ssize_t n = put(p + done, std::min(len - done, kPageCachePiece), done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("write", path, errno);
    }
    if (n == 0) fail_errno("write", path, EIO);
    done += static_cast<size_t>(n);
  }
}
}  // namespace

void write_all(int fd, const void* data, size_t len, const std::string& path) {
  put_all(data, len, path, [fd](const uint8_t* p, size_t n, size_t) { return ::write(fd, p, n); });
}

void pwrite_all(int fd, const void* data, size_t len, uint64_t offset, const std::string& path) {
  put_all(data, len, path, [fd, offset](const uint8_t* p, size_t n, size_t done) {
    return ::pwrite(fd, p, n, static_cast<off_t>(offset + done));
  });
}

void AtomicFile::check_owner() const {
  if (owner_.forked())
    fail(A2PACK_E_CLOSED,
         "{}: this file is being written by the process that opened it; a forked child cannot "
         "write, flush or commit it",
         path_);
}

void AtomicFile::flush_buffer() {
  check_owner();
  if (bg_) {
    bg_->drain();
    return;
  }
  write_all(fd_, buf_.data(), buf_.size(), tmp_);
  buf_.clear();
}
void AtomicFile::write(const void* data, size_t len) {
  if (committed_) fail(A2PACK_E_CLOSED, "{}: write after commit", path_);
  check_owner();
  const auto* p = static_cast<const uint8_t*>(data);
  if (bg_) {
    bg_->write(p, len);
  } else if (len >= kDirectWrite) {
    flush_buffer();                // keeps the bytes in order
    write_all(fd_, p, len, tmp_);  // large writes go straight through, uncopied
  } else {
    if (buf_.size() + len > kWriteBuffer) flush_buffer();
    buf_.insert(buf_.end(), p, p + len);
  }
  written_ += len;
}
bool AtomicFile::direct() const { return bg_ && bg_->direct(); }

void AtomicFile::pwrite(const void* data, size_t len, uint64_t offset) {
  if (offset + len > written_) fail(A2PACK_E_INTERNAL, "{}: pwrite past the end", tmp_);
  if (bg_) {
    check_owner();
    bg_->patch(data, len, offset);  // also patches the partial buffer it keeps
    return;
  }
  flush_buffer();
  pwrite_all(fd_, data, len, offset, tmp_);
}
void AtomicFile::commit(bool durable) {
  if (committed_) return;
  flush_buffer();
  bg_.reset();  // drained: nothing left for its thread
  if (durable && ::fsync(fd_) != 0) fail_errno("fsync", tmp_, errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail_errno("close", tmp_, errno);
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail_errno("rename to " + path_, tmp_, errno);
  committed_ = true;
  if (durable) fsync_dir(parent_dir(path_));
}

int reopen(int fd, int flags, const std::string& path) {
  // /proc/self/fd/N names the open file itself, whatever its name now is.
  int again = ::open(fmt::format("/proc/self/fd/{}", fd).c_str(), flags | O_CLOEXEC);
  if (again >= 0 || (errno != ENOENT && errno != ENOTDIR)) return again;
  // No /proc: the name, never through a link, and only if it is still the file.
  again = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  if (again < 0) return -1;
  struct stat a, b;
  if (::fstat(fd, &a) != 0 || ::fstat(again, &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino) {
    ::close(again);
    errno = ESTALE;
    return -1;
  }
  return again;
}

void write_file_atomic(const std::string& path, const void* data, size_t len) {
  AtomicFile f(path);
  f.write(data, len);
  f.commit();
}

}  // namespace a2pack
