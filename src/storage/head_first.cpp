#include "storage/head_first.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "base/error.hpp"
#include "base/file_io.hpp"

namespace a2pack::storage {
namespace {

constexpr size_t kSpillBuffer = 1u << 20;

std::string tmp_dir() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

}  // namespace

HeadFirstWriter::HeadFirstWriter(const std::string& path) : out_(open_write(path)) {
  if (out_->reserve_first_part()) return;
  const std::string dir = tmp_dir();
  spill_fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (spill_fd_ < 0) {
    // Filesystems without O_TMPFILE: a named file, unlinked at once.
    std::string tmpl = dir + "/a2pack-body-XXXXXX";
    spill_fd_ = ::mkostemp(tmpl.data(), O_CLOEXEC);
    if (spill_fd_ < 0) fail_errno("create a staging file in", dir, errno);
    ::unlink(tmpl.c_str());
  }
  buf_.reserve(kSpillBuffer);
}

HeadFirstWriter::~HeadFirstWriter() {
  // In a forked child the upload is the parent's and its part threads do
  // not exist here (waiting for them would hang): leak it.
  if (owner_.forked()) (void)out_.release();
  if (spill_fd_ >= 0) ::close(spill_fd_);
  // out_'s destructor aborts an uncommitted upload.
}

void HeadFirstWriter::flush_spill() {
  write_all(spill_fd_, buf_.data(), buf_.size(), "the staging file of " + url());
  buf_.clear();
}

void HeadFirstWriter::check_owner() const {
  if (owner_.forked())
    fail(A2PACK_E_CLOSED, "{}: this object is being uploaded by the process that opened it; a forked "
         "child cannot write or finish it", url());
}

void HeadFirstWriter::write(const void* data, size_t len) {
  check_owner();
  try {
    body_ += len;
    if (spill_fd_ < 0) return out_->write(data, len);
    const auto* p = static_cast<const uint8_t*>(data);
    if (buf_.size() + len > kSpillBuffer) flush_spill();
    if (len >= kSpillBuffer)
      write_all(spill_fd_, p, len, "the staging file of " + url());
    else
      buf_.insert(buf_.end(), p, p + len);
  } catch (...) {
    out_->abort();  // the upload cannot be completed now; give it up at once
    throw;
  }
}

void HeadFirstWriter::commit(const void* head, size_t len) {
  check_owner();
  try {
    if (spill_fd_ < 0) return out_->commit_with_head(head, len);
    flush_spill();
    out_->write(head, len);
    std::vector<uint8_t> chunk(kSpillBuffer);
    for (uint64_t off = 0; off < body_;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), body_ - off));
      ssize_t got = ::pread(spill_fd_, chunk.data(), n, static_cast<off_t>(off));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail_errno("read back the staging file of", url(), errno);
      if (got == 0) fail(A2PACK_E_IO, "{}: the staging file ended early at {}", url(), off);
      out_->write(chunk.data(), static_cast<size_t>(got));
      off += static_cast<uint64_t>(got);
    }
    out_->commit();
  } catch (...) {
    out_->abort();  // at once, not when the writer goes
    throw;
  }
}

}  // namespace a2pack::storage
