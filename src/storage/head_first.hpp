// Uploading an object whose first bytes are known only at the end: a pack's
// header and index precede its payloads, yet are written after them. An
// object store cannot seek back, so the body is streamed and the head put in
// front at commit():
//  - S3: parts may be uploaded in any order. The body goes up as parts 2, 3,
//    ...; its first part stays in memory and goes up last, behind the head,
//    as part 1. Memory: the head plus one part; no local disk.
//  - GCS (resumable uploads take bytes strictly in order): the body waits in
//    an unnamed temporary file under $TMPDIR (gone with the process, however
//    it ends) and is streamed behind the head at commit().
// Either way the object appears only at commit(); an uncommitted writer
// aborts its upload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/fork_stamp.hpp"
#include "storage/object_store.hpp"

namespace a2pack::storage {

class HeadFirstWriter {
 public:
  explicit HeadFirstWriter(const std::string& path);
  ~HeadFirstWriter();
  HeadFirstWriter(const HeadFirstWriter&) = delete;
  HeadFirstWriter& operator=(const HeadFirstWriter&) = delete;

  const std::string& url() const { return out_->url(); }
  // Append body bytes.
  void write(const void* data, size_t len);
  // Put `head` before the body and finish the upload.
  void commit(const void* head, size_t len);
  uint64_t body_bytes() const { return body_; }

 private:
  void flush_spill();
  void check_owner() const;
  std::unique_ptr<WriteObject> out_;
  int spill_fd_ = -1;            // in-order backends: the body meanwhile
  std::vector<uint8_t> buf_;     // write buffer of the spill
  uint64_t body_ = 0;
  ForkStamp owner_;  // a forked child leaves the parent's upload alone
};

}  // namespace a2pack::storage
