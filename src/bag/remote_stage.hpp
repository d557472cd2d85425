// Writing a record file to object storage (s3://, gs://): the writer writes
// a local staging copy with its usual code (compression, limits, spill) and
// commit() uploads it (storage::WriteObject: S3 multipart / GCS resumable,
// parts in parallel), records first, then the limits file of SEPARATE
// placement, so a reader never finds new limits beside old records. The
// object appears only when its upload completes; a writer that fails or is
// destroyed uncommitted uploads nothing (an upload under way is aborted).
// The staging folder is private (under $TMPDIR) and removed when the writer
// goes.
#pragma once

#include <string>

namespace a2pack::bag {

class RemoteStage {
 public:
  explicit RemoteStage(const std::string& url);
  ~RemoteStage();
  RemoteStage(const RemoteStage&) = delete;
  RemoteStage& operator=(const RemoteStage&) = delete;

  const std::string& url() const { return url_; }
  // Where the writer writes the records file.
  const std::string& local_path() const { return local_; }
  // Upload the committed local file(s).
  void upload(bool separate_limits) const;

 private:
  std::string url_, dir_, local_;
};

}  // namespace a2pack::bag
