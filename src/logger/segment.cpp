#include "logger/segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.hpp"
#include "base/file_io.hpp"

namespace a2pack::logger {

namespace {
// Buffered bytes are handed to the kernel once this many have gathered.
constexpr size_t kWriteChunk = 1 << 20;
constexpr const char* kSuffix = ".seg.zst";
}  // namespace

std::string segment_name(uint32_t index) { return fmt::format("{:05}{}", index, kSuffix); }

std::vector<uint32_t> list_segments(const std::string& segments_dir,
                                    std::vector<std::string>* others) {
  std::vector<uint32_t> out;
  DIR* d = ::opendir(segments_dir.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    fail_errno("open folder", segments_dir, errno);
  }
  const size_t slen = std::strlen(kSuffix);
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool ours = false;
    if (name.size() >= 5 + slen && name.size() <= 10 + slen &&
        name.compare(name.size() - slen, slen, kSuffix) == 0) {
      std::string digits = name.substr(0, name.size() - slen);
      if (digits.find_first_not_of("0123456789") == std::string::npos) {
        uint64_t v = std::strtoull(digits.c_str(), nullptr, 10);
        if (v <= UINT32_MAX && segment_name(static_cast<uint32_t>(v)) == name) {
          out.push_back(static_cast<uint32_t>(v));
          ours = true;
        }
      }
    }
    if (!ours && others) others->push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  if (others) std::sort(others->begin(), others->end());
  return out;
}

SegmentWriter::SegmentWriter(int dir_fd, std::string segments_dir, uint64_t rotate_bytes,
                             uint32_t first_index, Resume resume)
    : dir_fd_(dir_fd),
      dir_(std::move(segments_dir)),
      rotate_(rotate_bytes),
      next_index_(first_index),
      resume_(resume) {
  buf_.reserve(kWriteChunk + (kWriteChunk >> 2));
}

SegmentWriter::~SegmentWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void SegmentWriter::open_next() {
  const std::string name = segment_name(next_index_);
  path_ = dir_ + "/" + name;
  // O_EXCL: never append to a segment some earlier logger left behind, nor
  // open one through a link planted under its name.
  fd_ = ::openat(dir_fd_, name.c_str(),
                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_errno("create segment", path_, errno);
  cur_index_ = next_index_++;
  ++created_;
  cur_size_ = 0;
  frame_no_ = 0;
  seg_records_ = 0;
  dir_dirty_ = true;
  if (resume_.needed) {  // the first segment of a reopened folder says what it found
    put_marker(kFlagResume, resume_.segment, resume_.size);
    resume_.needed = false;
  }
}

void SegmentWriter::put_marker(uint8_t flags, uint32_t seq, uint64_t count) {
  BlockHeader m;
  m.flags = flags;
  m.segment = cur_index_;
  m.seq = seq;
  m.count = count;
  uint8_t hb[kHeaderSize];
  write_header(hb, m);
  buf_.insert(buf_.end(), hb, hb + kHeaderSize);
  cur_size_ += kHeaderSize;
  appended_ += kHeaderSize;
}

void SegmentWriter::append(const BlockHeader& h_in, const uint8_t* payload,
                           size_t payload_len) {
  size_t len = kHeaderSize + payload_len;
  if (fd_ >= 0 && cur_size_ > 0 &&
      (cur_size_ + len + kHeaderSize > rotate_ || frame_no_ == UINT32_MAX)) {
    // Finish the full segment durably now: only the newest segment can then
    // ever hold unsynced bytes, and sync() stays one fdatasync.
    put_marker(kFlagClose, frame_no_, seg_records_);
    sync();
    if (::close(fd_) != 0) {
      fd_ = -1;
      fail_errno("close", path_, errno);
    }
    fd_ = -1;
  }
  if (fd_ < 0) open_next();
  BlockHeader h = h_in;
  h.version = kFormatVersion;
  h.flags = 0;
  h.segment = cur_index_;
  h.seq = frame_no_++;
  h.count = seg_records_;
  seg_records_ += h.n_records;
  uint8_t hb[kHeaderSize];
  write_header(hb, h);
  buf_.insert(buf_.end(), hb, hb + kHeaderSize);
  buf_.insert(buf_.end(), payload, payload + payload_len);
  cur_size_ += len;
  appended_ += len;
  if (buf_.size() >= kWriteChunk) write_out();
}

void SegmentWriter::write_out() {
  size_t done = 0;
  while (done < buf_.size()) {
    ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(done));
      fail_errno("write", path_, err);
    }
    done += static_cast<size_t>(n);
  }
  buf_.clear();
}

void SegmentWriter::sync() {
  if (fd_ < 0) return;
  write_out();
  if (::fdatasync(fd_) != 0) fail_errno("fdatasync", path_, errno);
  if (dir_dirty_) {
    // Some filesystems refuse fsync on folders; no data is lost by that.
    if (::fsync(dir_fd_) != 0 && errno != EINVAL && errno != EROFS)
      fail_errno("fsync folder", dir_, errno);
    dir_dirty_ = false;
  }
}

void SegmentWriter::close(bool clean) {
  if (fd_ < 0) return;
  if (clean) put_marker(kFlagClose, frame_no_, seg_records_);
  sync();
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail_errno("close", path_, errno);
}

}  // namespace a2pack::logger
