#include "bag/staged_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "base/error.hpp"
#include "base/file_io.hpp"

namespace a2pack::bag {
namespace {

constexpr size_t kBuffer = 1u << 20;
// Writes from this size up skip the buffer: the kernel copies them straight
// from the caller's memory (still in cache when the caller just built it),
// which is cheaper than a copy into the buffer first.
constexpr size_t kDirect = 32u << 10;
std::atomic<uint64_t> g_counter{0};

void write_all(int fd, const uint8_t* p, size_t len, const std::string& path) {
  while (len) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("write", path, errno);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace

StagedFile::StagedFile(std::string path) : path_(std::move(path)) {
  // ".bagtmp" keeps the name apart from AtomicFile's ".tmp-" names.
  tmp_ = fmt::format("{}.bagtmp-{}-{}", path_, ::getpid(), g_counter.fetch_add(1));
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_errno("create", tmp_, errno);
  buf_.reserve(kBuffer);
}

StagedFile::~StagedFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void StagedFile::write(const void* data, size_t len) {
  if (committed_) fail(A2PACK_E_CLOSED, "{}: write after commit", path_);
  const auto* p = static_cast<const uint8_t*>(data);
  if (len >= kDirect) {
    flush();                       // keep the order of the bytes
    write_all(fd_, p, len, tmp_);  // big writes skip the buffer: no extra copy
  } else {
    if (buf_.size() + len > kBuffer) flush();
    buf_.insert(buf_.end(), p, p + len);
  }
  written_ += len;
}

void StagedFile::flush() {
  write_all(fd_, buf_.data(), buf_.size(), tmp_);
  buf_.clear();
}

void StagedFile::commit(bool durable) {
  if (committed_) return;
  flush();
  if (durable && ::fsync(fd_) != 0) fail_errno("fsync", tmp_, errno);
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail_errno("close", tmp_, errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail_errno("rename to " + path_, tmp_, errno);
  committed_ = true;
  if (durable) fsync_dir(parent_dir(path_));
}

}  // namespace a2pack::bag
