#include "logger/sequence.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <unordered_map>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "logger/segment.hpp"

namespace a2pack::logger {

namespace {

uint64_t block_end(const FrameRef& f) { return f.offset + f.header.size() + f.header.compressed_len; }

std::string frame_range(uint32_t a, uint32_t b) {
  return a == b ? fmt::format("frame {}", a) : fmt::format("frames {} to {}", a, b);
}

}  // namespace

SegmentEnd check_sequence(const std::string& path, uint32_t number, uint64_t size,
                          std::vector<FrameRef>& frames, std::vector<Problem>& problems,
                          uint64_t& skipped) {
  SegmentEnd end;
  skipped = 0;
  for (const auto& f : frames) {
    end.end = std::max(end.end, block_end(f));
    end.sequenced |= f.header.sequenced();
  }
  if (!end.sequenced) return end;  // versions 1 and 2: no sequence to check
  for (const auto& p : problems)
    if (p.offset >= end.end) end.tail_damaged = true;
  (void)size;

  // 1. Blocks in file order: keep the data frames that belong here.
  const size_t n_scan_problems = problems.size();
  std::vector<FrameRef> data;
  data.reserve(frames.size());
  const FrameRef* close = nullptr;
  uint64_t foreign = 0, after_close = 0, old_version = 0;
  const FrameRef* first_foreign = nullptr;
  const FrameRef* first_after_close = nullptr;
  for (size_t i = 0; i < frames.size(); ++i) {
    const FrameRef& f = frames[i];
    const BlockHeader& h = f.header;
    if (!h.sequenced()) {
      ++old_version;
      ++skipped;
      problems.push_back({path, f.offset, A2PACK_E_CORRUPT,
                          fmt::format("a frame of header version {} inside a segment of version "
                                      "{} (spliced in from an older segment); frame skipped",
                                      h.version, kFormatVersion)});
      continue;
    }
    if (h.segment != number) {
      if (!foreign++) first_foreign = &f;
      if (!h.marker()) ++skipped;
      continue;
    }
    if (close) {
      if (!after_close++) first_after_close = &f;
      if (!h.marker()) ++skipped;
      continue;
    }
    if (h.flags == kFlagResume) {
      if (i == 0 && f.offset == 0) {
        end.resumes = true;
        end.resumed_segment = h.seq;
        end.resumed_size = h.count;
      } else {
        problems.push_back({path, f.offset, A2PACK_E_CORRUPT,
                            "a resume marker that is not the segment's first block; ignored"});
      }
      continue;
    }
    if (h.flags == kFlagClose) {
      close = &f;
      continue;
    }
    data.push_back(f);
  }
  if (foreign) {
    // The segment is not what its name says: that problem stands for its
    // end too (a copy of a closed segment has its closing frame skipped).
    end.tail_damaged = true;
    problems.push_back(
        {path, first_foreign->offset, A2PACK_E_CORRUPT,
         fmt::format("{} block(s) from offset {} on were written into segment {}, not this one "
                     "(a copied or renamed segment); their frames are skipped",
                     foreign, first_foreign->offset, segment_name(first_foreign->header.segment))});
  }
  if (after_close)
    problems.push_back({path, first_after_close->offset, A2PACK_E_CORRUPT,
                        fmt::format("{} block(s) after the segment's closing frame at offset {} "
                                    "(appended to a closed segment); skipped",
                                    after_close, close->offset)});

  // 2. Duplicates: the first copy of a frame number is decoded, later ones
  //    are skipped.
  std::unordered_map<uint32_t, uint64_t> first_at;
  std::vector<FrameRef> uniq;
  uniq.reserve(data.size());
  for (const auto& f : data) {
    auto [it, fresh] = first_at.emplace(f.header.seq, f.offset);
    if (fresh) {
      uniq.push_back(f);
      continue;
    }
    ++skipped;
    problems.push_back({path, f.offset, A2PACK_E_CORRUPT,
                        fmt::format("frame {} again (first at offset {}): a duplicated frame; "
                                    "skipped",
                                    f.header.seq, it->second)});
  }

  // 3. Order: frame numbers rise in file order. Out-of-order frames are
  //    decoded where they lie (records come in file order) and reported.
  for (size_t i = 1; i < uniq.size(); ++i)
    if (uniq[i].header.seq < uniq[i - 1].header.seq)
      problems.push_back({path, uniq[i].offset, A2PACK_E_CORRUPT,
                          fmt::format("frame {} follows frame {} (offset {}): frames out of order; "
                                      "decoded in file order",
                                      uniq[i].header.seq, uniq[i - 1].header.seq,
                                      uniq[i - 1].offset)});

  // 4. Gaps in the numbering (and to the closing frame's count), with the
  //    records they held from the neighbours' record counts.
  std::vector<const FrameRef*> by_seq;
  by_seq.reserve(uniq.size());
  for (const auto& f : uniq) by_seq.push_back(&f);
  std::sort(by_seq.begin(), by_seq.end(),
            [](const FrameRef* a, const FrameRef* b) { return a->header.seq < b->header.seq; });
  // A gap before `next` (nullptr: before the closing frame): frames
  // [first, last], preceded by `prev` (nullptr: the segment's start).
  auto report_gap = [&](const FrameRef* prev, const FrameRef* next, uint32_t first,
                        uint32_t last) {
    const uint64_t before = prev ? prev->header.count + prev->header.n_records : 0;
    const uint64_t after = next ? next->header.count : close->header.count;
    std::string recs = after >= before ? fmt::format("{} records", after - before)
                                       : std::string("records");
    const uint64_t lo = prev ? block_end(*prev) : 0;
    const uint64_t hi = next ? next->offset : close->offset;
    // A damaged range between the neighbours (already reported by the scan)
    // took the frames with it: say so there rather than twice.
    if (lo <= hi)
      for (size_t k = 0; k < n_scan_problems; ++k) {
        Problem& p = problems[k];
        if (p.offset >= lo && p.offset < hi) {
          p.message += fmt::format("; {} of the segment ({}) lost with it",
                                   frame_range(first, last), recs);
          return;
        }
      }
    problems.push_back(
        {path, hi, A2PACK_E_NOT_FOUND,
         fmt::format("{} of the segment ({}) missing before this {}: frames removed",
                     frame_range(first, last), recs, next ? "frame" : "closing frame")});
  };
  uint32_t expect = 0;
  const FrameRef* prev = nullptr;
  for (const FrameRef* f : by_seq) {
    const BlockHeader& h = f->header;
    // (Record counts only size the losses in messages: a frame whose counts
    // were forged is reported by the verification that follows, once.)
    if (h.seq > expect) report_gap(prev, f, expect, h.seq - 1);
    expect = h.seq + 1;
    prev = f;
  }
  if (close) {
    end.closed = true;
    if (close->header.seq > expect) {
      report_gap(prev, nullptr, expect, close->header.seq - 1);
    } else if (close->header.seq < expect) {
      problems.push_back({path, close->offset, A2PACK_E_CORRUPT,
                          fmt::format("the closing frame counts {} frames, the segment holds "
                                      "frame {}",
                                      close->header.seq, expect - 1)});
    }
  }
  end.data_frames = uniq.size();
  frames = std::move(uniq);
  std::stable_sort(problems.begin(), problems.end(),
                   [](const Problem& a, const Problem& b) { return a.offset < b.offset; });
  return end;
}

void check_segment_ends(const std::vector<std::string>& paths, const std::vector<uint32_t>& ids,
                        const std::vector<uint64_t>& sizes, const std::vector<SegmentEnd>& ends,
                        bool in_use, std::vector<Problem>& problems) {
  for (size_t i = 0; i < ends.size(); ++i) {
    const SegmentEnd& e = ends[i];
    if (!e.sequenced || e.closed) continue;
    size_t j = i + 1;  // the next segment with something in it
    while (j < ends.size() && sizes[j] == 0) ++j;
    if (j < ends.size() && ends[j].resumes && ends[j].resumed_segment == ids[i]) {
      if (ends[j].resumed_size == sizes[i])
        problems.push_back(
            {paths[i], e.end, A2PACK_OK,
             fmt::format("no closing frame: its logger was killed after {} frames; {} resumed "
                         "the folder and found it as it is. Records not yet written at the kill "
                         "were never stored",
                         e.data_frames, segment_name(ids[j])),
             true});
      else
        problems.push_back(
            {paths[i], std::min(sizes[i], ends[j].resumed_size), A2PACK_E_CORRUPT,
             fmt::format("the segment is {} bytes, but was {} when its logger was killed and "
                         "{} resumed the folder: {} since",
                         sizes[i], ends[j].resumed_size, segment_name(ids[j]),
                         sizes[i] < ends[j].resumed_size ? "cut" : "grown")});
      continue;
    }
    if (j == ends.size() && in_use) continue;  // a logger is writing it
    if (e.tail_damaged) continue;              // the torn tail is reported already
    problems.push_back(
        {paths[i], e.end, A2PACK_E_CORRUPT,
         fmt::format("the segment ends after {} frames without its closing frame: cut at a "
                     "frame boundary, or its logger was killed{}; frames written after offset "
                     "{} are lost",
                     e.data_frames,
                     j < ends.size() ? fmt::format(" and {} does not begin by resuming it",
                                                   segment_name(ids[j]))
                                     : std::string(" (no logger has reopened the folder since)"),
                     e.end)});
  }
}

bool folder_in_use(const std::string& dir) {
  struct stat st;
  if (::stat((dir + "/.lock").c_str(), &st) != 0) return false;
  std::ifstream in("/proc/locks");
  if (!in) return false;
  // "1: FLOCK  ADVISORY  WRITE 709 fe:00:9980139 0 EOF": pid, then
  // major:minor (hex) and inode of the locked file.
  const std::string want = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev),
                                       static_cast<uint64_t>(st.st_ino));
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("FLOCK") == std::string::npos) continue;
    size_t at = line.find(want);
    if (at != std::string::npos && (at + want.size() == line.size() || line[at + want.size()] == ' ') &&
        at > 0 && line[at - 1] == ' ')
      return true;
  }
  return false;
}

bool needs_resume(const std::string& seg_dir, const std::vector<uint32_t>& ids,
                  uint32_t& segment, uint64_t& size) {
  for (size_t k = ids.size(); k-- > 0;) {
    std::string path = seg_dir + "/" + segment_name(ids[k]);
    MappedFile f;
    try {
      f = MappedFile(path, MappedFile::Advice::sequential);
    } catch (const Error&) {
      return false;  // unreadable: readers report it; no marker can vouch for it
    }
    if (f.size() == 0) continue;  // created, never written: look further back
    std::vector<FrameRef> frames;
    std::vector<Problem> problems;
    scan_segment(f.data(), f.size(), path, 0, frames, problems);
    uint64_t skipped = 0;
    SegmentEnd e = check_sequence(path, ids[k], f.size(), frames, problems, skipped);
    if (!e.sequenced || e.closed) return false;
    segment = ids[k];
    size = f.size();
    return true;
  }
  return false;
}

}  // namespace a2pack::logger
