// A file written under a temporary name in its destination folder and moved
// to its final name by commit() — base/AtomicFile's contract, with the fsync
// made optional. bagz's writer never fsyncs; a2pack's bag writer does by
// default (WriterOptions::durable) and can match bagz when the caller asks
// for it, so both can be compared like for like. Either way a writer that
// fails or is dropped before commit() leaves nothing under the final name:
// the rename is what makes the file appear, and it happens last.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace a2pack::bag {

class StagedFile {
 public:
  explicit StagedFile(std::string path);
  ~StagedFile();  // removes the temporary file unless committed
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  // Writes under 32 KiB are gathered in a 1 MiB buffer; larger ones go
  // straight to the kernel without a copy.
  void write(const void* data, size_t len);
  // Hand buffered bytes to the kernel (no fsync).
  void flush();
  // Flush; with `durable`, fsync the file before the rename and the folder
  // after it; then rename into place.
  void commit(bool durable);
  // Descriptor of the temporary file (for writeback hints).
  int fd() const { return fd_; }
  uint64_t bytes_written() const { return written_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
  std::vector<uint8_t> buf_;
  bool committed_ = false;
};

}  // namespace a2pack::bag
