// Writes one Bagz file, byte-compatible with bagz's Writer.
//
// Atomic like every a2pack writer: the records (and, for SEPARATE placement,
// the limits) go to temporary names in the destination folder and appear
// under their final names only at commit(). A writer destroyed without
// commit(), or one whose write failed, removes its temporary files: no
// half-written file ever opens as a complete one. With SEPARATE placement the
// old records file is removed before the new limits file is renamed in, so a
// crash between the two renames leaves a missing file, never a mismatched
// pair.
//
// TAIL limits are kept in memory and spilled to an unnamed temporary file
// past 1 MiB, so memory stays flat however many records are written.
//
// Object storage (s3://, gs://): the records stream to a storage::WriteObject
// (S3 multipart upload / GCS resumable upload, parts sent as they fill), the
// TAIL limits are appended at commit(), and SEPARATE limits stream to a
// second upload: commit() deletes the old limits object, completes the
// records upload, then the limits upload. Nothing but the limits spill
// (8 bytes a record, unnamed, under $TMPDIR) touches local disk; an object
// appears only when its upload completes, and a writer that fails or is
// destroyed uncommitted aborts its uploads (no object, no parts).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bag/format.hpp"
#include "bag/zstd_codec.hpp"
#include "base/file_io.hpp"
#include "base/fork_stamp.hpp"
#include "storage/object_store.hpp"

namespace a2pack::bag {

class Writer {
 public:
  Writer(const std::string& path, const WriterOptions& options);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void write(const uint8_t* data, size_t len);
  // Records i = data[offsets[i] - offsets[0], offsets[i+1] - offsets[0]) for
  // i < n (offsets has n+1 non-decreasing entries). Compression runs on up to
  // options.workers threads; the records land in order.
  void write_batch(const uint8_t* data, const uint64_t* offsets, size_t n);
  // Hand buffered bytes to the operating system (still under the temporary
  // names until commit). Object storage: nothing to do (parts go up as they
  // fill; an upload cannot be flushed without completing it).
  void flush();
  // Finish: write the limits, fsync, rename into place. Idempotent.
  void commit();

  const std::string& path() const { return path_; }
  uint64_t count() const { return count_; }
  uint64_t records_bytes() const { return end_; }
  bool compressed() const { return codec_ != nullptr; }
  bool committed() const { return committed_; }

 private:
  void check_usable() const;
  void append_record(const uint8_t* data, size_t len);
  void add_limit();
  void spill();
  void start_writeback();
  void put_records(const void* data, size_t len);
  void put_limits(const void* data, size_t len);
  bool separate() const { return limits_ || remote_limits_; }
  template <typename F>
  void guarded(F&& f);

  std::string path_;
  WriterOptions options_;
  std::unique_ptr<ZstdCodec> codec_;
  std::vector<ZstdCompressor> cctx_;  // one per worker
  std::unique_ptr<AtomicFile> records_;
  std::unique_ptr<AtomicFile> limits_;  // SEPARATE placement
  // s3:// / gs:// outputs instead of records_ / limits_ (SEPARATE: remote_limits_).
  std::unique_ptr<storage::WriteObject> remote_records_, remote_limits_;
  ForkStamp owner_;  // a forked child may not use, abort or finish the uploads
  std::vector<uint64_t> pending_;       // TAIL limits not yet spilled
  int spill_fd_ = -1;
  int sync_fd_ = -1;            // the records temp file, for early writeback
  uint64_t unsynced_ = 0;       // record bytes written since the last writeback start
  uint64_t spilled_ = 0;  // limits in the spill file
  uint64_t count_ = 0, end_ = 0;
  std::vector<uint8_t> scratch_;
  bool committed_ = false, failed_ = false;
};

}  // namespace a2pack::bag
