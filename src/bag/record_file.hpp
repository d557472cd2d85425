// How the bytes of a shard are fetched, per the reader's cache policy:
//   SYSTEM           read-only mmap; the access pattern becomes madvise().
//   DROP_AFTER_READ  pread() then posix_fadvise(DONTNEED) on what was read, so
//                    an epoch larger than RAM does not evict everything else;
//                    the access pattern becomes posix_fadvise() on the file.
//   DIRECT_IO        O_DIRECT preads at the filesystem's alignment (statx
//                    STATX_DIOALIGN, else probed from 512 bytes up to the
//                    page size); where the filesystem refuses O_DIRECT the
//                    file falls back to the DROP_AFTER_READ path.
// A file in object storage (s3://, gs://; storage/object_store.hpp) is read
// by ranged requests whatever the policy (mapping and page-cache hints are
// local-only); forward-moving reads get a read-ahead window.
// Every read is bounds-checked against the file size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "bag/format.hpp"
#include "base/file_io.hpp"
#include "storage/object_store.hpp"

namespace a2pack::bag {

class RecordFile {
 public:
  RecordFile(const std::string& path, AccessPattern access, CachePolicy cache,
             bool refuse_direct_io = false);
  ~RecordFile();
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // The whole file mapped (SYSTEM policy), else null.
  const uint8_t* mapped() const { return map_.data(); }
  bool is_mapped() const { return cache_ == CachePolicy::system; }
  // Copy [offset, offset+len) into dst. CORRUPT when past the end of file.
  void read(uint64_t offset, size_t len, uint8_t* dst) const;

  // One read of a batch: [offset, offset+len) of `file` into `dst`.
  struct Span {
    const RecordFile* file;
    uint64_t offset;
    size_t len;
    uint8_t* dst;
  };
  // Reads a batch of spans of files read with pread (DROP_AFTER_READ,
  // DIRECT_IO; not mapped, not remote), as read() would one by one: all
  // queued at once through io_uring from the calling thread
  // (base/batch_read.hpp), else on up to `threads` threads, a pread each.
  // `on_read`, when given, is called with the index of each span as soon as
  // its bytes are in place (from the calling thread, or from the reading
  // threads without io_uring); it must not throw.
  static void read_many(const Span* spans, size_t n, uint32_t threads,
                        const std::function<void(size_t)>* on_read = nullptr);
  // What the file ended up using: "mmap", "pread+dontneed", "o_direct/<align>",
  // "buffered fallback (O_DIRECT refused)".
  const std::string& mode() const { return mode_; }
  // Alignment used by O_DIRECT reads (0 when not in direct mode).
  size_t direct_alignment() const { return align_; }
  // The object when the file is in object storage, else null.
  const storage::ReadObject* object() const { return obj_.get(); }

 private:
  void check_bounds(uint64_t offset, size_t len) const;
  void read_direct(uint64_t offset, size_t len, uint8_t* dst) const;
  void drop_pages(uint64_t offset, size_t len) const;
  size_t probe_alignment();
  std::string describe() const;

  std::string path_;
  CachePolicy cache_;
  uint64_t size_ = 0;
  MappedFile map_;
  std::unique_ptr<storage::ReadObject> obj_;  // object storage
  int fd_ = -1;          // pread paths
  size_t align_ = 0;     // O_DIRECT alignment; 0 = buffered
  bool fell_back_ = false;
  uint64_t page_ = 4096;  // the page size, for what DONTNEED can drop
  std::string mode_;
};

}  // namespace a2pack::bag
