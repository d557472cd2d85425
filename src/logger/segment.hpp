// Appending blocks to rotating segment files `<dir>/segments/NNNNN.seg.zst`.
// Used by the logger's writer thread only (not thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace a2pack::logger {

// Name of segment `index` inside a segments folder ("00042.seg.zst"; more
// digits past 99999).
std::string segment_name(uint32_t index);

// Segment indices present in a segments folder, ascending (names that are not
// ours are ignored). Missing folder → empty.
std::vector<uint32_t> list_segments(const std::string& segments_dir);

class SegmentWriter {
 public:
  SegmentWriter(std::string segments_dir, uint64_t rotate_bytes, uint32_t first_index);
  ~SegmentWriter();
  SegmentWriter(const SegmentWriter&) = delete;
  SegmentWriter& operator=(const SegmentWriter&) = delete;

  // Append one block (header then payload). Starts a new segment first when
  // the current one is not empty and would grow past rotate_bytes; the first
  // append creates the first segment, so an idle logger leaves no file.
  void append(const uint8_t* header, size_t header_len, const uint8_t* payload,
              size_t payload_len);
  // Hand buffered bytes to the kernel (survives the process being killed).
  void write_out();
  // write_out, then fdatasync the segment and fsync the folder when a segment
  // was created since the last sync: everything appended so far is durable.
  void sync();
  // sync and close the file.
  void close();

  uint64_t bytes_appended() const { return appended_; }
  uint32_t segments_created() const { return created_; }

 private:
  void open_next();
  std::string dir_;
  uint64_t rotate_;
  uint32_t next_index_;
  int fd_ = -1;
  std::string path_;
  uint64_t cur_size_ = 0;  // bytes of the current segment, buffered ones included
  std::vector<uint8_t> buf_;
  bool dir_dirty_ = false;
  uint64_t appended_ = 0;
  uint32_t created_ = 0;
};

}  // namespace a2pack::logger
