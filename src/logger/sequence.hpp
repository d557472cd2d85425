// Version 3's frame sequence (docs/logger.md, "Frame sequence"): every data
// frame carries its segment's number, its own number in the segment and the
// records before it; a cleanly closed segment ends with a closing frame; a
// logger that reopens a folder whose newest segment has none begins its
// first segment with a resume marker recording that segment's size. From
// these a reader tells lost, duplicated, reordered and foreign frames, and a
// segment cut at a frame boundary from one closed cleanly or left by a
// killed logger. Segments of versions 1 and 2 have none of this and are not
// checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "logger/decoder.hpp"

namespace a2pack::logger {

// What check_sequence learnt about one segment's end.
struct SegmentEnd {
  bool sequenced = false;     // holds version-3 blocks
  bool closed = false;        // has its closing frame
  // A problem reported already stands for a missing closing frame: a
  // damaged range after the last good block (a torn write), or blocks of
  // another segment.
  bool tail_damaged = false;
  uint64_t data_frames = 0;   // distinct data frames found
  uint64_t end = 0;           // offset after its last good block
  bool resumes = false;       // begins with a resume marker:
  uint32_t resumed_segment = 0;
  uint64_t resumed_size = 0;  // that segment's size when the folder was reopened
};

// Check the blocks of segment `number` (`size` bytes at `path`) that
// scan_segment found. Markers, duplicates, blocks of another segment and
// blocks after the closing frame are removed from `frames` (`skipped`
// counts the data frames among them); every lost, duplicated, reordered or
// foreign frame is a problem naming the segment and offset. `problems`
// holds the scan's problems for this segment: one whose damaged range took
// whole frames with it is extended to say how many and how many records.
SegmentEnd check_sequence(const std::string& path, uint32_t number, uint64_t size,
                          std::vector<FrameRef>& frames, std::vector<Problem>& problems,
                          uint64_t& skipped);

// Problems (or notes) for the sequenced segments without a closing frame:
// a note when a later segment's resume marker says its logger was killed
// and the segment is as that logger found it; nothing for the newest
// segment while a logger holds the folder (`in_use`); otherwise a problem
// (cut at a frame boundary, or killed and never reopened).
void check_segment_ends(const std::vector<std::string>& paths, const std::vector<uint32_t>& ids,
                        const std::vector<uint64_t>& sizes, const std::vector<SegmentEnd>& ends,
                        bool in_use, std::vector<Problem>& problems);

// Whether a live process holds the flock of `dir`/.lock (an open logger).
// Read from /proc/locks: taking the lock, even shared and briefly, could
// make a logger opening the folder at that moment fail. False when unknown.
bool folder_in_use(const std::string& dir);

// For a logger reopening a folder: true when the newest non-empty segment
// of `ids` is of version 3 and has no closing frame (its logger was killed);
// `segment` and `size` then say which and how large, for the resume marker.
bool needs_resume(const std::string& seg_dir, const std::vector<uint32_t>& ids,
                  uint32_t& segment, uint64_t& size);

}  // namespace a2pack::logger
