#include "dataset/fsutil.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.hpp"
#include "base/file_io.hpp"

namespace a2pack::dataset {

namespace {
std::atomic<uint64_t> g_counter{0};
}  // namespace

// ---------------------------------------------------------------- TempFile
TempFile::TempFile(std::string final_path) : final_(std::move(final_path)) {
  tmp_ = fmt::format("{}.tmp-{}-{}", final_, ::getpid(), g_counter.fetch_add(1));
  fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_errno("create", tmp_, errno);
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!installed_) ::unlink(tmp_.c_str());
}

void TempFile::write(const void* data, size_t len) {
  pwrite_all(fd_, data, len, size_, tmp_);
  size_ += len;
}

void TempFile::pwrite(const void* data, size_t len, uint64_t offset) {
  if (offset + len > size_) fail(A2PACK_E_INTERNAL, "{}: positional write past the end", tmp_);
  pwrite_all(fd_, data, len, offset, tmp_);
}

void TempFile::copy_from(int src_fd, const std::string& src_path, uint64_t offset, uint64_t len) {
  uint64_t done = 0;
  bool use_cfr = true;
  std::vector<uint8_t> buf;
  while (done < len) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(len - done, uint64_t{1} << 30));
    if (use_cfr) {
      loff_t in = static_cast<loff_t>(offset + done), out = static_cast<loff_t>(size_);
      ssize_t n = ::copy_file_range(src_fd, &in, fd_, &out, want, 0);
      if (n > 0) {
        done += static_cast<uint64_t>(n);
        size_ += static_cast<uint64_t>(n);
        continue;
      }
      if (n == 0)
        fail(A2PACK_E_CORRUPT, "{}: unexpected end of file at offset {}", src_path, offset + done);
      if (errno == EINTR) continue;
      if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP &&
          errno != EBADF)
        fail_errno("copy to " + tmp_, src_path, errno);
      use_cfr = false;  // e.g. across file systems: fall back to read + write
    }
    if (buf.empty()) buf.resize(8 << 20);
    size_t n = std::min(want, buf.size());
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(src_fd, buf.data() + got, n - got, static_cast<off_t>(offset + done + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        fail_errno("read", src_path, errno);
      }
      if (r == 0)
        fail(A2PACK_E_CORRUPT, "{}: unexpected end of file at offset {}", src_path,
             offset + done + got);
      got += static_cast<size_t>(r);
    }
    write(buf.data(), n);
    done += n;
  }
}

void TempFile::sync() {
  if (::fsync(fd_) != 0) fail_errno("fsync", tmp_, errno);
}

void TempFile::install() {
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail_errno("close", tmp_, errno);
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), final_.c_str()) != 0) fail_errno("rename to " + final_, tmp_, errno);
  installed_ = true;
  fsync_dir(parent_dir(final_));
}

// ---------------------------------------------------------------- DirLock
DirLock::DirLock(const std::string& dir, bool exclusive, bool wait) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) fail_errno("open folder", dir, errno);
  int op = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);
  while (::flock(fd_, op) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      fail(A2PACK_E_IO, "{}: the dataset is locked by another process (an append or build is "
           "running)", dir);
    fail_errno("lock", dir, err);
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

// ---------------------------------------------------------------- misc
void crash_point(const char* name) {
  const char* at = std::getenv("A2PACK_TEST_CRASH_AT");
  if (at && std::strcmp(at, name) == 0) ::_exit(kCrashExitCode);
}

bool is_temp_name(const std::string& name) {
  for (const char* prefix : {"steps.npy.tmp-", "manifest.json.tmp-"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

std::vector<std::string> list_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) fail_errno("list", dir, errno);
  std::vector<std::string> out;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    out.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::string strip_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace a2pack::dataset
