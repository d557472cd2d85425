// The storage layer beneath bag, pack and dataset: one small interface over
// local files, Amazon S3 (s3://) and Google Cloud Storage (gs://). Paths are
// parsed by base/path_prefix.hpp.
//
// Reading: open() pins the object's size and version (S3 ETag, GCS
// generation, local mtime+inode); every later ranged read asks for exactly
// that version, so a reader never mixes two versions of an object: a changed
// object is an error naming it. Batch reads coalesce neighbouring ranges and
// fetch them in parallel (Settings::parallelism). With read-ahead on, reads
// that move forward through the object are served from a window fetched in
// the background.
//
// Writing: bytes go up as they come (S3 multipart upload, GCS resumable
// upload, a temporary local file) and the object appears only at commit(); a
// writer destroyed without commit(), or one whose upload failed, aborts the
// upload, so no partial object is ever visible.
//
// Network settings (timeouts, retries, parallelism) are in options.hpp; every
// network error names the URL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/fork_stamp.hpp"

namespace a2pack::storage {

struct ReadRange {
  uint64_t offset = 0;
  size_t len = 0;
  uint8_t* dst = nullptr;
};

class ReadObject {
 public:
  virtual ~ReadObject();
  // "s3://b/k", "gs://b/k" or the local path.
  const std::string& url() const { return url_; }
  uint64_t size() const { return size_; }
  // The pinned version (ETag, generation, ...), for cache keys and messages.
  const std::string& version() const { return version_; }
  bool remote() const { return remote_; }

  // Copy [offset, offset+len) into dst. CORRUPT past the end; IO naming the
  // URL when the object changed or the network failed.
  void read(uint64_t offset, size_t len, uint8_t* dst) const;
  // Many ranges at once (any order, overlaps allowed): sorted, neighbours
  // less than 16 KiB apart merged into one request of up to 8 MiB, requests
  // run on up to `parallelism` threads (0 = Settings::parallelism).
  void read_many(const ReadRange* ranges, size_t n, uint32_t parallelism = 0) const;
  // Serve forward-moving reads from parts fetched ahead (`bytes` = how far
  // ahead, 0 = off): once a read (or a dense batch) starts where the previous
  // one ended, or inside the parts already fetched, the next `bytes` are
  // fetched as parts (bytes/4, at most kReadAheadPart), all in flight at once, while the
  // caller works on these; every byte is fetched once (a read that needs a
  // part being fetched waits for it).
  void set_read_ahead(size_t bytes);
  static constexpr size_t kReadAheadPart = 8u << 20;
  // Fetch [offset, offset+len) into a new buffer (in parallel parts when large).
  std::vector<uint8_t> read_all(uint64_t offset, size_t len) const;

 protected:
  // Wait for a background window fetch; every backend's destructor calls it
  // first, since the fetch uses the backend.
  void drain() noexcept;
  // One ranged read of the backend; bounds already checked.
  virtual void fetch(uint64_t offset, size_t len, uint8_t* dst) const = 0;
  std::string url_;
  uint64_t size_ = 0;
  std::string version_;
  bool remote_ = false;

 private:
  struct Part {
    uint64_t offset = 0;
    size_t len = 0;
    std::shared_ptr<std::vector<uint8_t>> data;
    std::shared_future<void> ready;
  };
  // Read-ahead path of read() / read_many(): schedule parts, copy what they
  // cover, fetch the rest directly.
  void read_ahead_many(const ReadRange* ranges, size_t n, uint32_t parallelism) const;
  // Under ra_mu_: after a read of [start, end), drop parts far behind and
  // queue parts up to end + read_ahead_ when reads move forward.
  void schedule(uint64_t start, uint64_t end, bool dense) const;
  void retire(Part&& p) const;  // keep an in-flight fetch until it ends (ra_mu_)
  void forget_parent_parts() const;  // in a forked child (ra_mu_)
  void fetch_parallel(const ReadRange* ranges, size_t n, uint32_t parallelism) const;
  size_t read_ahead_ = 0;
  mutable std::mutex ra_mu_;
  mutable std::vector<Part> parts_;  // by offset, contiguous but for failed ones dropped (ra_mu_)
  mutable std::vector<std::shared_future<void>> retired_;  // dropped while in flight
  mutable uint64_t last_end_ = UINT64_MAX;  // end of the last read (ra_mu_)
  mutable ForkStamp fork_stamp_;            // the process whose threads fetch parts_ (ra_mu_)
};

class WriteObject {
 public:
  virtual ~WriteObject();
  const std::string& url() const { return url_; }
  // Append bytes (uploaded in parts as they accumulate).
  virtual void write(const void* data, size_t len) = 0;
  // Finish the upload: the object appears now, whole. Idempotent.
  virtual void commit() = 0;
  // Give the upload up (parts deleted); never throws. Called by destructors
  // of uncommitted writers.
  virtual void abort() noexcept = 0;
  uint64_t bytes_written() const { return written_; }

  // For formats whose first bytes are known only at the end (a pack's header
  // and index precede its payloads); storage/head_first.hpp uses these.
  // Backends that can upload parts out of order (S3 multipart) return true
  // from reserve_first_part() (called before any write()): the first part's
  // bytes are then kept back, and commit_with_head() uploads `head` followed
  // by them as part 1 before completing. Others return false (the default).
  virtual bool reserve_first_part() { return false; }
  virtual void commit_with_head(const void* head, size_t len);

 protected:
  std::string url_;
  uint64_t written_ = 0;
};

// Open for reading. NOT_FOUND naming the URL when the object does not exist.
std::unique_ptr<ReadObject> open_read(const std::string& path);
// Open a writer; `durable` applies to local files (fsync before rename).
std::unique_ptr<WriteObject> open_write(const std::string& path, bool durable = true);
// Delete an object (or local file); one that does not exist is no error.
// Writers use it only on their own outputs (bag/writer.hpp).
void remove(const std::string& path);
// Full paths ("s3://b/k" ... or local paths) of the objects whose names begin
// with `prefix_path`, sorted. Local: the files in the prefix's folder whose
// names begin with its last component.
std::vector<std::string> list(const std::string& prefix_path);
// Whether `path` names an object in S3 or GCS (see base/path_prefix.hpp).
bool is_remote(const std::string& path);

}  // namespace a2pack::storage
