// Appending blocks to rotating segment files `<dir>/segments/NNNNN.seg.zst`.
// Used by the logger's writer thread only (not thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "logger/format.hpp"

namespace a2pack::logger {

// Name of segment `index` inside a segments folder ("00042.seg.zst"; more
// digits past 99999).
std::string segment_name(uint32_t index);

// Segment indices present in a segments folder, ascending. Missing folder →
// empty. `others`, when given, receives the names of every other entry
// (not a canonical segment name, or a number past 2^32 - 1): a reader
// reports them rather than ignore them.
std::vector<uint32_t> list_segments(const std::string& segments_dir,
                                    std::vector<std::string>* others = nullptr);

// Writes version-3 blocks: numbers each data frame in its segment, ends a
// segment it finishes (rotation, close) with a closing frame, and begins its
// first segment with a resume marker when given one (the folder's newest
// segment was left without a closing frame by a killed logger).
// The resume marker a reopened folder's first new segment begins with.
struct SegmentResume {
  bool needed = false;
  uint32_t segment = 0;  // the segment left unclosed
  uint64_t size = 0;     // its size in bytes as found
};

class SegmentWriter {
 public:
  using Resume = SegmentResume;
  // `dir_fd`: the segments folder `segments_dir`, open (borrowed: the
  // caller keeps it open while the writer lives); segments are created in it
  // with openat(), so the name `segments_dir` is used only in messages.
  SegmentWriter(int dir_fd, std::string segments_dir, uint64_t rotate_bytes, uint32_t first_index,
                Resume resume = {});
  ~SegmentWriter();
  SegmentWriter(const SegmentWriter&) = delete;
  SegmentWriter& operator=(const SegmentWriter&) = delete;

  // Append one data frame: `h` gives its lengths, counts and payload CRC;
  // the segment, frame number and record count are filled in here. Starts
  // a new segment first when the current one is not empty and would grow
  // past rotate_bytes; the first append creates the first segment, so an
  // idle logger leaves no file.
  void append(const BlockHeader& h, const uint8_t* payload, size_t payload_len);
  // Hand buffered bytes to the kernel (survives the process being killed).
  void write_out();
  // write_out, then fdatasync the segment and fsync the folder when a segment
  // was created since the last sync: everything appended so far is durable.
  void sync();
  // End the segment with its closing frame, sync and close the file. With
  // `clean` false (after a write error: records may have been lost) the
  // closing frame is left out, so readers do not take the segment for whole.
  void close(bool clean = true);

  uint64_t bytes_appended() const { return appended_; }
  uint32_t segments_created() const { return created_; }

 private:
  void open_next();
  void put_marker(uint8_t flags, uint32_t seq, uint64_t count);
  int dir_fd_;
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
  uint32_t frame_no_ = 0;       // data frames in the current segment
  uint64_t seg_records_ = 0;    // their records
  uint32_t cur_index_ = 0;      // the current segment's number
  Resume resume_;
};

}  // namespace a2pack::logger
