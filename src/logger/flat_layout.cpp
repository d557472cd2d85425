#include "logger/flat_layout.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <unordered_map>

#include <zstd.h>

#include "base/bytes.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/varint.hpp"
#include "logger/segment.hpp"

namespace a2pack::logger {

namespace {

constexpr uint32_t kZstdMagic = 0xFD2FB528;

bool is_frame_start(const uint8_t* p, size_t left) {
  if (left < 4) return false;
  uint32_t m = le::load<uint32_t>(p);
  return m == kZstdMagic || (m & 0xFFFFFFF0u) == 0x184D2A50u;  // data or skippable frame
}

// Start of the next zstd frame after `from` that zstd can delimit, or `size`.
size_t resync(const uint8_t* data, size_t size, size_t from) {
  static const uint8_t magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
  while (from < size) {
    const void* hit = ::memmem(data + from, size - from, magic, sizeof magic);
    if (!hit) return size;
    size_t pos = static_cast<size_t>(static_cast<const uint8_t*>(hit) - data);
    if (!ZSTD_isError(ZSTD_findFrameCompressedSize(data + pos, size - pos))) return pos;
    from = pos + 1;
  }
  return size;
}

// One frame's records, parsed before any of them is kept.
struct FlatRecords {
  std::vector<uint32_t> sid;
  std::vector<int64_t> delta;
  std::vector<uint64_t> end;  // end of each record's non-zeros in idx/q
  std::vector<uint32_t> idx;
  std::vector<int64_t> q;
};

template <unsigned Bits>
uint64_t get(const uint8_t*& p, const uint8_t* end, size_t rec, const char* field) {
  uint64_t v;
  auto r = varint::read<Bits>(p, end, v);
  if (r != varint::Result::ok)
    fail(A2PACK_E_CORRUPT, "record {} of the frame: {} varint {}", rec, field,
         r == varint::Result::truncated ? "runs past the end of the frame" : "is overlong");
  return v;
}

// The records of docs/formats.md (payload version 1's layout), back to back,
// filling [p, end) exactly.
void parse_records(const uint8_t* p, const uint8_t* end, uint64_t max_records, FlatRecords& out) {
  for (size_t rec = 0; p < end; ++rec) {
    if (rec == max_records)
      fail(A2PACK_E_OUT_OF_RANGE,
           "the frame holds more than {} records, the limit per frame (max_frame_records; "
           "raise it with --max-frame-records)",
           max_records);
    out.sid.push_back(static_cast<uint32_t>(get<32>(p, end, rec, "stream id")));
    out.delta.push_back(varint::zigzag_decode(get<64>(p, end, rec, "epoch delta")));
    uint64_t n = get<32>(p, end, rec, "non-zero count");
    if (n > kMaxRecordValues)
      fail(A2PACK_E_CORRUPT, "record {} of the frame: {} non-zeros (at most {})", rec, n,
           kMaxRecordValues);
    if (n > static_cast<uint64_t>(end - p) / 2)  // an index and a value take a byte each
      fail(A2PACK_E_CORRUPT, "record {} of the frame: {} non-zeros cannot fit in {} bytes", rec,
           n, end - p);
    uint64_t idx = 0;
    for (uint64_t k = 0; k < n; ++k) {
      uint64_t g = get<32>(p, end, rec, k ? "index gap" : "first index");
      idx = k ? idx + g + 1 : g;
      if (idx > UINT32_MAX)
        fail(A2PACK_E_CORRUPT, "record {} of the frame: index {} past 2^32 - 1", rec, idx);
      out.idx.push_back(static_cast<uint32_t>(idx));
    }
    for (uint64_t k = 0; k < n; ++k)
      out.q.push_back(varint::zigzag_decode(get<64>(p, end, rec, "value")));
    out.end.push_back(out.idx.size());
  }
}

// Decompress one frame into `buf` (at most `max_bytes`), whether or not its
// header states the content size.
size_t decompress(ZSTD_DCtx* dctx, const uint8_t* src, size_t len, uint64_t max_frame_bytes,
                  uint64_t max_expansion, std::vector<uint8_t>& buf) {
  // The smaller of the two limits applies; the message names the one that did.
  const bool by_ratio = max_expansion < max_frame_bytes / std::max<size_t>(len, 1) &&
                        max_expansion * len < max_frame_bytes;
  const uint64_t max_bytes = by_ratio ? max_expansion * len : max_frame_bytes;
  auto over = [&](std::string size) {
    if (by_ratio)
      fail(A2PACK_E_OUT_OF_RANGE,
           "the frame decompresses to {}, over {} times its {} bytes (max_expansion; raise it "
           "with --max-expansion)",
           size, max_expansion, len);
    fail(A2PACK_E_OUT_OF_RANGE,
         "the frame decompresses to {}, over the limit of {} per frame (max_frame_bytes; "
         "raise it with --max-frame-bytes)",
         size, max_bytes);
  };
  unsigned long long content = ZSTD_getFrameContentSize(src, len);
  if (content == ZSTD_CONTENTSIZE_ERROR) fail(A2PACK_E_CORRUPT, "bad zstd frame header");
  if (content != ZSTD_CONTENTSIZE_UNKNOWN && content > max_bytes)
    over(fmt::format("{} bytes", content));
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  ZSTD_inBuffer in{src, len, 0};
  size_t have = 0;
  buf.resize(content != ZSTD_CONTENTSIZE_UNKNOWN ? static_cast<size_t>(content) + 1 : 4096);
  for (;;) {
    ZSTD_outBuffer out{buf.data(), buf.size(), have};
    size_t r = ZSTD_decompressStream(dctx, &out, &in);
    if (ZSTD_isError(r)) fail(A2PACK_E_CORRUPT, "zstd: {}", ZSTD_getErrorName(r));
    have = out.pos;
    if (have > max_bytes) over(fmt::format("more than {} bytes", max_bytes));
    if (r == 0) return have;
    if (in.pos == in.size && have < buf.size())
      fail(A2PACK_E_CORRUPT, "the zstd frame ends early");
    if (have == buf.size()) buf.resize(std::min<uint64_t>(buf.size() * 2, max_bytes + 1));
  }
}

}  // namespace

bool flat_layout_dir(const std::string& dir) {
  struct stat st;
  if (::stat((dir + "/segments").c_str(), &st) == 0 || errno != ENOENT) return false;
  return !list_segments(dir).empty();
}

void decode_flat_dir(const std::string& dir, const ScaleTable& scales, const DecodeOptions& opts,
                     Decoded& d) {
  std::vector<std::string> others;
  auto ids = list_segments(dir, &others);
  report_others(dir, others, false, d.problems);
  std::vector<MappedFile> files(ids.size());
  std::vector<std::string> paths(ids.size());
  std::vector<uint64_t> sizes(ids.size(), 0);
  std::vector<Problem> open_problems;
  for (size_t i = 0; i < ids.size(); ++i) {
    paths[i] = dir + "/" + segment_name(ids[i]);
    try {
      files[i] = MappedFile(paths[i], MappedFile::Advice::sequential);
      sizes[i] = files[i].size();
    } catch (const Error& e) {
      open_problems.push_back({paths[i], 0, e.status(), e.what()});
    }
  }
  check_numbering(dir, ids, sizes, d.problems);
  for (auto& p : open_problems) d.problems.push_back(std::move(p));
  d.segments = ids.size();

  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) fail(A2PACK_E_NO_MEMORY, "{}: out of memory creating a zstd context", dir);
  std::unordered_map<uint32_t, int64_t> last_tick;  // the reference writer's last_tick_for_stream
  std::vector<uint8_t> buf;
  FlatRecords recs;
  std::vector<double> vals;
  constexpr const char* kShift =
      "; records of the lost frame's stream that follow decode with epochs shifted by its delta "
      "(this layout stores each epoch against the stream's previous record)";
  bool stopped = false;
  for (size_t fi = 0; fi < ids.size() && !stopped; ++fi) {
    const uint8_t* data = files[fi].data();
    const size_t size = files[fi].size();
    d.file_bytes += size;
    uint64_t unknown = 0;
    uint32_t first_unknown = 0;
    size_t pos = 0;
    while (pos < size) {
      const bool starts = is_frame_start(data + pos, size - pos);
      const size_t fsz = starts ? ZSTD_findFrameCompressedSize(data + pos, size - pos) : 0;
      if (!starts || ZSTD_isError(fsz)) {
        size_t next = resync(data, size, pos + 1);
        d.problems.push_back(
            {paths[fi], pos, A2PACK_E_CORRUPT,
             fmt::format("no complete zstd frame here ({}); skipped {} bytes to {}{}",
                         starts ? (next == size ? "a frame cut short, e.g. by a crash"
                                             : "a damaged frame header")
                             : "bad magic",
                         next - pos,
                         next < size ? fmt::format("the next frame at offset {}", next)
                                     : std::string("the end of the file"),
                         next < size || fi + 1 < ids.size() ? kShift : "")});
        ++d.bad_frames;
        pos = next;
        continue;
      }
      if (le::load<uint32_t>(data + pos) != kZstdMagic) {  // a skippable frame: nothing of ours
        pos += fsz;
        continue;
      }
      recs = FlatRecords{};
      size_t raw_len = 0;
      try {
        raw_len = decompress(dctx.get(), data + pos, fsz, opts.max_frame_bytes,
                             opts.max_expansion, buf);
        parse_records(buf.data(), buf.data() + raw_len, opts.max_frame_records, recs);
      } catch (const Error& e) {
        d.problems.push_back({paths[fi], pos, e.status(),
                              fmt::format("{}; frame skipped{}", e.what(), kShift)});
        ++d.bad_frames;
        pos += fsz;
        continue;
      } catch (const std::bad_alloc&) {
        d.problems.push_back({paths[fi], pos, A2PACK_E_NO_MEMORY,
                              fmt::format("out of memory decompressing and parsing the frame "
                                          "({} bytes of buffer); frame skipped{}",
                                          buf.capacity(), kShift)});
        ++d.bad_frames;
        pos += fsz;
        continue;
      }
      const uint64_t nr = recs.sid.size();
      std::string limit;
      if (d.n_records() + nr > opts.max_records)
        limit = fmt::format("{} records decoded before this frame of {}, the limit per decode is "
                            "{} (max_records; raise it with --max-records)",
                            d.n_records(), nr, opts.max_records);
      else if (d.raw_bytes + raw_len > opts.max_bytes)
        limit = fmt::format("{} decompressed bytes decoded before this frame of {}, the limit "
                            "per decode is {} (max_bytes; raise it with --max-bytes)",
                            d.raw_bytes, raw_len, opts.max_bytes);
      if (!limit.empty()) {
        d.problems.push_back({paths[fi], pos, A2PACK_E_OUT_OF_RANGE,
                              fmt::format("decode limit reached: {}; nothing from here on is "
                                          "decoded",
                                          limit)});
        ++d.bad_frames;
        stopped = true;
        break;
      }
      try {
        for (size_t r = 0; r < nr; ++r) {
          const uint32_t sid = recs.sid[r];
          const uint64_t b = r ? recs.end[r - 1] : 0, e = recs.end[r];
          const StreamInfo* s = sid < scales.size() ? scales[sid] : nullptr;
          if (!s) {
            if (!unknown++) first_unknown = sid;
            continue;
          }
          int64_t& last = last_tick[sid];
          last = static_cast<int64_t>(static_cast<uint64_t>(last) +
                                      static_cast<uint64_t>(recs.delta[r]));
          d.stream_ids.push_back(sid);
          d.epochs.push_back(scale_epoch(*s, last));
          vals.resize(e - b);
          scale_values(*s, recs.q.data() + b, e - b, vals.data());
          d.indices.insert(d.indices.end(), recs.idx.begin() + static_cast<ptrdiff_t>(b),
                           recs.idx.begin() + static_cast<ptrdiff_t>(e));
          d.values.insert(d.values.end(), vals.begin(), vals.end());
          d.offsets.push_back(d.indices.size());
        }
      } catch (const std::bad_alloc&) {
        fail(A2PACK_E_NO_MEMORY,
             "{}: offset {}: out of memory growing the output columns past {} records and {} "
             "non-zeros",
             paths[fi], pos, d.stream_ids.size(), d.indices.size());
      }
      ++d.frames;
      d.raw_bytes += raw_len;
      pos += fsz;
    }
    if (unknown)
      d.problems.push_back({paths[fi], 0, A2PACK_E_NOT_FOUND,
                            fmt::format("{} records skipped: no sidecar for stream {}{}", unknown,
                                        first_unknown, unknown > 1 ? " (and maybe others)" : "")});
  }
}

}  // namespace a2pack::logger
