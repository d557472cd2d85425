#include "atomic_write.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "command.hpp"

namespace a2cli {
namespace {

std::atomic<uint64_t> g_counter{0};
// Taken names skipped before giving up: enough for any leftovers of this
// pid, few enough that a folder full of planted names ends in an error.
constexpr int kMaxTries = 1000;

[[noreturn]] void fail_io(const std::string& path, const std::string& step,
                          const std::string& what, int err) {
  throw CliError(fmt::format("{}: cannot write: {} {}: {}", path, step, what, std::strerror(err)),
                 kExitSystem);
}

std::string folder_of(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  return pos == 0 ? "/" : path.substr(0, pos);
}

void fsync_folder(const std::string& path, const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io(path, "open folder", dir, errno);
  int err = ::fsync(fd) != 0 ? errno : 0;
  ::close(fd);
  // Some filesystems refuse fsync on folders; no data is lost by that.
  if (err && err != EINVAL && err != EROFS) fail_io(path, "fsync folder", dir, err);
}

// A new temporary beside `path`, never opened through a link nor over an
// existing file: returns its descriptor and sets `tmp`.
int create_temp(const std::string& path, std::string& tmp) {
  for (int tries = 0;; ++tries) {
    tmp = fmt::format("{}.tmp-{}-{}", path, ::getpid(), g_counter.fetch_add(1));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      // Held while the file is written: tells cleaners (`a2pack clean`)
      // that a live writer owns it.
      (void)::flock(fd, LOCK_EX | LOCK_NB);
      return fd;
    }
    if (errno == EINTR) continue;
    if (errno != EEXIST) fail_io(path, "create", tmp, errno);
    if (tries + 1 == kMaxTries)
      throw CliError(fmt::format("{}: cannot write: {} temporary names up to {} are all taken "
                                 "(files or links someone else made there)",
                                 path, kMaxTries, tmp),
                     kExitSystem);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const void* data, size_t len, bool durable) {
  std::string tmp;
  int fd = create_temp(path, tmp);
  auto give_up = [&](const char* step, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    fail_io(path, step, tmp, err);
  };
  const auto* p = static_cast<const char*>(data);
  for (size_t done = 0; done < len;) {
    ssize_t n = ::write(fd, p + done, std::min<size_t>(len - done, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) give_up("write", errno);
    if (n == 0) give_up("write", EIO);
    done += static_cast<size_t>(n);
  }
  if (durable && ::fsync(fd) != 0) give_up("fsync", errno);
  int rc = ::close(fd);
  fd = -1;
  // Delayed allocation and network filesystems report a full disk here.
  if (rc != 0) give_up("close", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) give_up("rename", errno);
  if (durable) fsync_folder(path, folder_of(path));
}

void sync_folder(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io(dir, "open folder", dir, errno);
  // syncfs reports writeback errors of the filesystem's files (Linux 5.8+).
  int err = ::syncfs(fd) != 0 ? errno : 0;
  if (!err && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) err = errno;
  ::close(fd);
  if (err) fail_io(dir, "sync", dir, err);
}

namespace {
// The errno of the first failed write to stdout seen, for finish_stdout: a
// write that stdio made on its own (its buffer full) fails with the stream's
// error flag set and the data dropped, and by the end errno says nothing.
int first_stdout_errno = 0;
}  // namespace

void write_stdout(const void* data, size_t len) {
  // Short, or complete into the buffer but with an earlier flush failed:
  // either way the output is incomplete.
  if ((len && std::fwrite(data, 1, len, stdout) != len) || std::ferror(stdout)) {
    const int err = errno ? errno : EIO;
    if (!first_stdout_errno) first_stdout_errno = err;
    throw CliError(fmt::format("stdout: cannot write: {}", std::strerror(err)), kExitSystem);
  }
}

int finish_stdout() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return kExitOk;
  int err = errno ? errno : first_stdout_errno ? first_stdout_errno : EIO;
  fmt::print(stderr, "a2pack: error: stdout: cannot write: {}\n", std::strerror(err));
  return kExitSystem;
}

}  // namespace a2cli
