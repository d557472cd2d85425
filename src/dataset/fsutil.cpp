#include "dataset/fsutil.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
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

// ---------------------------------------------------------------- ExtendFile
ExtendFile::ExtendFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd_ < 0) fail_errno("open for writing", path_, errno);
}

ExtendFile::~ExtendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ExtendFile::write(const void* data, size_t len) {
  pwrite_all(fd_, data, len, end_, path_);
  end_ += len;
}

void ExtendFile::pwrite(const void* data, size_t len, uint64_t offset) {
  pwrite_all(fd_, data, len, offset, path_);
}

void ExtendFile::truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) fail_errno("truncate", path_, errno);
  end_ = size;
}

void ExtendFile::sync() {
  if (::fsync(fd_) != 0) fail_errno("fsync", path_, errno);
}

// ---------------------------------------------------------------- DirLock
namespace {

using Clock = std::chrono::steady_clock;

// flock() with a deadline: flock has none, so poll with LOCK_NB, sleeping
// 1 ms at first and up to 20 ms. Returns false when the deadline passed.
bool flock_until(int fd, int op, int64_t timeout_ms, const std::string& path) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
  int nb = timeout_ms < 0 ? 0 : LOCK_NB;
  auto nap = std::chrono::milliseconds(1);
  for (;;) {
    if (::flock(fd, op | nb) == 0) return true;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) fail_errno("lock", path, errno);
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace

std::string lock_holders(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  std::ifstream f("/proc/locks");
  if (!f) return "";
  const std::string dev_ino = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev),
                                          static_cast<unsigned long>(st.st_ino));
  std::vector<long> pids;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string num, kind, adv, mode, id;
    long pid = 0;
    if (!(in >> num >> kind)) continue;
    if (kind == "->") continue;  // a waiter, not a holder
    if (kind != "FLOCK" || !(in >> adv >> mode >> pid >> id)) continue;
    if (id == dev_ino && std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
  }
  std::string out;
  for (long pid : pids)
    out += fmt::format("{}pid {}{}", out.empty() ? "" : ", ", pid,
                       pid == static_cast<long>(::getpid()) ? " (this process)" : "");
  return out;
}

DirLock::DirLock(const std::string& dir, bool exclusive, int64_t timeout_ms) {
  const auto start = Clock::now();
  auto left = [&] {
    if (timeout_ms < 0) return timeout_ms;
    auto used = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    return std::max<int64_t>(timeout_ms - used, 0);
  };
  const std::string gate_path = dir + "/steps.npy";
  auto timed_out = [&](const std::string& what) {
    std::string who = lock_holders(dir);
    std::string gate_who = lock_holders(gate_path);
    if (who.empty()) who = gate_who;
    fail(A2PACK_E_IO,
         "{}: the dataset is locked by {} ({}); gave up after {} ms. Readers hold the lock only "
         "while they load the dataset, an append or a build for its whole run; wait longer with "
         "lock_timeout_ms (CLI: --lock-timeout SECONDS, -1 = no limit)",
         dir, who.empty() ? "another process" : who, what, timeout_ms);
  };
  // None in an empty folder: no gate. Opened without blocking: a FIFO put in
  // steps.npy's place is refused, naming it, instead of waiting for a writer.
  gate_ = open_for_reading(gate_path);
  if (gate_ >= 0) {
    bool got = false;
    try {
      got = flock_until(gate_, LOCK_EX, exclusive ? timeout_ms : -1, gate_path);
    } catch (...) {
      ::close(gate_);
      gate_ = -1;
      throw;
    }
    if (!got) {
      ::close(gate_);
      gate_ = -1;
      timed_out("a writer is waiting for it or holds it");
    }
  }
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    int err = errno;
    if (gate_ >= 0) ::close(gate_);
    gate_ = -1;
    fail_errno("open folder", dir, err);
  }
  bool ok = false;
  try {
    ok = flock_until(fd_, exclusive ? LOCK_EX : LOCK_SH, exclusive ? left() : -1, dir);
  } catch (...) {
    ::close(fd_);
    if (gate_ >= 0) ::close(gate_);
    fd_ = gate_ = -1;
    throw;
  }
  if (!ok) {
    ::close(fd_);
    if (gate_ >= 0) ::close(gate_);
    fd_ = gate_ = -1;
    timed_out(exclusive ? "readers loading it, or another append or build" : "an append or build");
  }
  if (!exclusive && gate_ >= 0) {  // a reader lets the next one in at once
    ::close(gate_);
    gate_ = -1;
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
  if (gate_ >= 0) ::close(gate_);
}

// ---------------------------------------------------------------- misc
void crash_point(const char* name) {
  const char* at = std::getenv("A2PACK_TEST_CRASH_AT");
  if (at && std::strcmp(at, name) == 0) ::_exit(kCrashExitCode);
}

bool is_temp_name(const std::string& name) {
  if (name == kFolderMarker) return true;
  for (const char* prefix : {"steps.npy.tmp-", "manifest.json.tmp-", "append-journal.json.tmp-"})
    if (name.rfind(prefix, 0) == 0) return true;
  // A shard being written: "steps-NNNNN.npy.tmp-..." (dataset/shards.hpp).
  if (name.size() > 20 && name.compare(0, 6, "steps-") == 0 &&
      name.compare(11, 9, ".npy.tmp-") == 0)
    return std::all_of(name.begin() + 6, name.begin() + 11, [](char c) { return c >= '0' && c <= '9'; });
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
