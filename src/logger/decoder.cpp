#include "logger/decoder.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <algorithm>
#include <new>
#include <stdexcept>

#include <unistd.h>

#include <zstd.h>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "logger/cpu_features.hpp"
#include "logger/kernels/decode_values.hpp"  // the portable Scaling
#include "logger/kernels/kernels.hpp"
#include "base/varint.hpp"
#include "base/worker_pool.hpp"
#include "logger/flat_layout.hpp"
#include "logger/segment.hpp"
#include "logger/sequence.hpp"

namespace a2pack::logger {

namespace {

// Position of the next header (prefix and header CRC both good) at or after
// `from`, or `size` when none. Both header sizes end their prefix with the
// magic "A2LG" at byte 8: that is what is searched for.
size_t find_next_header(const uint8_t* data, size_t size, size_t from) {
  size_t at = from + 8;
  while (at + sizeof kBlockMagic <= size) {
    const void* hit = ::memmem(data + at, size - at, kBlockMagic, sizeof kBlockMagic);
    if (!hit) return size;
    size_t magic = static_cast<size_t>(static_cast<const uint8_t*>(hit) - data);
    size_t pos = magic - 8;
    BlockHeader h;
    HeaderCheck c = read_header(data + pos, size - pos, h);
    if (c != HeaderCheck::bad_prefix && c != HeaderCheck::bad_crc &&
        c != HeaderCheck::short_header)
      return pos;
    at = magic + 1;
  }
  return size;
}

const char* header_problem(HeaderCheck c) {
  switch (c) {
    case HeaderCheck::bad_prefix: return "no frame header (bad magic)";
    case HeaderCheck::bad_crc: return "frame header CRC32C mismatch";
    case HeaderCheck::bad_version: return "frame header of an unsupported format version";
    case HeaderCheck::bad_fields: return "frame header with impossible fields";
    case HeaderCheck::short_header: return "frame header cut short";
    default: return "frame header ok";
  }
}

}  // namespace

void bad_record(uint32_t i, const char* what) {
  fail(A2PACK_E_CORRUPT, "record {}: {}", i, what);
}

void scan_segment(const uint8_t* data, size_t size, const std::string& path, uint32_t file,
                  std::vector<FrameRef>& frames, std::vector<Problem>& problems) {
  size_t pos = 0;
  auto torn_header = [&] {
    problems.push_back({path, pos, A2PACK_E_CORRUPT,
                        fmt::format("{} trailing bytes, too few for a frame header (a torn "
                                    "write); skipped",
                                    size - pos)});
  };
  while (pos < size) {
    if (size - pos < kMinHeaderSize) return torn_header();
    BlockHeader h;
    HeaderCheck c = read_header(data + pos, size - pos, h);
    if (c == HeaderCheck::short_header) return torn_header();
    if (c == HeaderCheck::ok) {
      const size_t hs = h.size();
      if (h.compressed_len <= size - pos - hs) {
        frames.push_back({file, pos, h});
        pos += hs + h.compressed_len;
        continue;
      }
      size_t next = find_next_header(data, size, pos + 1);
      problems.push_back(
          {path, pos, A2PACK_E_CORRUPT,
           fmt::format("truncated frame: the header announces {} compressed bytes, {} remain{} "
                       "(a write cut short, e.g. by a crash); frame skipped",
                       h.compressed_len, size - pos - hs,
                       next < size ? fmt::format(", next frame at offset {}", next) : "")});
      pos = next;
      continue;
    }
    size_t next = find_next_header(data, size, pos + 1);
    a2pack_status st = c == HeaderCheck::bad_crc       ? A2PACK_E_CHECKSUM
                       : c == HeaderCheck::bad_version ? A2PACK_E_UNSUPPORTED
                                                       : A2PACK_E_CORRUPT;
    problems.push_back(
        {path, pos, st,
         fmt::format("{}; skipped {} bytes to {}", header_problem(c), next - pos,
                     next < size ? fmt::format("the next frame at offset {}", next)
                                 : std::string("the end of the file"))});
    pos = next;
  }
}

namespace {

using FrameFn = FrameCount (*)(const uint8_t*, size_t, uint32_t, const ScaleTable&,
                               const FrameSink&);
using BulkFn = bool (*)(const uint8_t*, size_t, uint32_t, const ScaleTable&, const FrameSink&,
                        FrameCount&);

// The parsers a DecoderChoice stands for on this CPU: version 1, version 2,
// and the bulk parser alone (nullptr where there is none).
struct Parsers {
  FrameFn v1;
  FrameFn v2;
  BulkFn bulk;
};

Parsers parsers_for(DecoderChoice choice) {
#if defined(__x86_64__)
  if (cpu_runs_fast_builds() && choice != DecoderChoice::portable) {
    if (cpu_runs_avx512_builds() && choice == DecoderChoice::best)
      return {fast512::decode_frame, fast512::decode_frame_v2_best, fast512::decode_frame_v2_bulk};
    return {fast::decode_frame,
            choice == DecoderChoice::checked ? fast::decode_frame_v2 : fast::decode_frame_v2_best,
            fast::decode_frame_v2_bulk};
  }
#else
  (void)choice;
#endif
  return {generic::decode_frame, generic::decode_frame_v2, nullptr};
}

Parsers g_parsers = parsers_for(DecoderChoice::best);

// Varint terminators (bytes below 0x80) in [p, p + len). Eight bytes at a
// time: the flags summed by a multiply that adds all eight byte lanes into
// the top byte.
uint64_t count_terminators(const uint8_t* p, size_t len) {
  uint64_t t = 0;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t x;
    std::memcpy(&x, p + i, 8);
    t += (((~x & 0x8080808080808080ull) >> 7) * 0x0101010101010101ull) >> 56;
  }
  for (; i < len; ++i) t += p[i] < 0x80;
  return t;
}

void check_version(uint8_t version) {
  if (version < kOldestVersion || version > kPayloadVersion)
    fail(A2PACK_E_UNSUPPORTED, "frame payload format version {} (this library reads {} to {})",
         version, kOldestVersion, kPayloadVersion);
}

}  // namespace

void use_decoder(DecoderChoice choice) { g_parsers = parsers_for(choice); }

bool decode_frame_v2_bulk_only(const uint8_t* raw, size_t len, uint32_t n_records,
                               const ScaleTable& scales, const FrameSink& out, FrameCount& count,
                               DecoderChoice build) {
  const BulkFn bulk = parsers_for(build).bulk;
  return bulk && bulk(raw, len, n_records, scales, out, count);
}

FrameCount decode_frame(uint8_t version, const uint8_t* raw, size_t len, uint32_t n_records,
                        const ScaleTable& scales, const FrameSink& out) {
  check_version(version);
  return (version == 1 ? g_parsers.v1 : g_parsers.v2)(raw, len, n_records, scales, out);
}

size_t count_values(uint8_t version, const uint8_t* raw, size_t len, uint32_t n_records) {
  check_version(version);
  uint64_t fixed = uint64_t{3} * n_records;
  if (version == 1) {
    // A record of n non-zeros has 3 + 2n varints.
    uint64_t t = count_terminators(raw, len);
    if (t < fixed || (t - fixed) % 2 != 0)
      fail(A2PACK_E_CORRUPT, "{} varints cannot make {} records", t, n_records);
    return static_cast<size_t>((t - fixed) / 2);
  }
  // Version 2: 3 + n varints of structure and n of values per record.
  if (len < kV2Prefix) fail(A2PACK_E_CORRUPT, "a {}-byte frame has no structure length", len);
  uint32_t slen = le::load<uint32_t>(raw);
  if (slen > len - kV2Prefix)
    fail(A2PACK_E_CORRUPT, "the structure length {} runs past the frame ({} bytes)", slen, len);
  uint64_t ts = count_terminators(raw + kV2Prefix, slen);
  uint64_t tv = count_terminators(raw + kV2Prefix + slen, len - kV2Prefix - slen);
  if (ts < fixed || ts - fixed != tv)
    fail(A2PACK_E_CORRUPT, "{} structure and {} value varints cannot make {} records", ts, tv,
         n_records);
  return static_cast<size_t>(tv);
}

void decode_records(uint8_t version, const uint8_t* raw, size_t len, uint32_t n_records,
                    const ScaleTable& scales, FrameRecords& out) {
  size_t nv = count_values(version, raw, len, n_records);
  out.stream_ids.resize(n_records);
  out.epochs.resize(n_records);
  out.offsets.resize(static_cast<size_t>(n_records) + 1);
  out.indices.resize(nv);
  out.values.resize(nv);
  out.offsets[0] = 0;
  FrameSink sink{out.stream_ids.data(), out.epochs.data(), out.offsets.data() + 1,
                 out.indices.data(), out.values.data(), 0, n_records, nv};
  FrameCount c = decode_frame(version, raw, len, n_records, scales, sink);
  out.stream_ids.resize(c.records);
  out.epochs.resize(c.records);
  out.offsets.resize(c.records + 1);
  out.indices.resize(c.values);
  out.values.resize(c.values);
  out.skipped_unknown = c.skipped_unknown;
  out.first_unknown = c.first_unknown;
}

double scale_epoch(const StreamInfo& s, int64_t tick) {
  return Scaling::of(s).epoch(static_cast<uint64_t>(tick));
}

void scale_values(const StreamInfo& s, const int64_t* q, size_t n, double* out) {
  const Scaling sc = Scaling::of(s);
  for (size_t k = 0; k < n; ++k) out[k] = sc.value(static_cast<double>(q[k]));
}

void check_numbering(const std::string& seg_dir, const std::vector<uint32_t>& ids,
                     const std::vector<uint64_t>& sizes, std::vector<Problem>& problems) {
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t expected = i == 0 ? 0 : ids[i - 1] + 1;
    if (ids[i] > expected) {
      uint32_t last = ids[i] - 1;
      std::string missing =
          last == expected ? fmt::format("segment {} is missing", segment_name(expected))
                           : fmt::format("segments {} to {} ({}) are missing",
                                         segment_name(expected), segment_name(last),
                                         last - expected + 1);
      problems.push_back(
          {seg_dir + "/" + segment_name(expected), 0, A2PACK_E_NOT_FOUND,
           fmt::format("{} while {} follows: the records written to it are lost (segments are "
                       "numbered from {} without gaps)",
                       missing, segment_name(ids[i]), segment_name(0))});
    }
    if (sizes[i] == 0 && i + 1 < ids.size())
      problems.push_back({seg_dir + "/" + segment_name(ids[i]), 0, A2PACK_OK,
                          fmt::format("empty segment followed by {} (a logger stopped before "
                                      "writing to it, then the folder was reopened); nothing "
                                      "lost",
                                      segment_name(ids[i + 1])),
                          true});
  }
}

namespace {

// Bytes of output columns `records` records with `values` non-zeros take.
uint64_t column_bytes(uint64_t records, uint64_t values) {
  return records * (sizeof(uint32_t) + sizeof(double) + sizeof(uint64_t)) +
         values * (sizeof(uint32_t) + sizeof(double));
}

// Physical memory: what the columns may reserve up front on the strength of
// verified headers (address space only; untouched pages cost nothing).
uint64_t physical_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                               : uint64_t{1} << 32;
}

template <typename Col>
void grow(Col& c, size_t n, const std::string& dir, const char* what) {
  try {
    c.resize(n);
  } catch (const std::bad_alloc&) {
    fail(A2PACK_E_NO_MEMORY, "{}: out of memory growing the {} column to {} entries ({} bytes)",
         dir, what, n, static_cast<uint64_t>(n) * sizeof(typename Col::value_type));
  } catch (const std::length_error&) {
    fail(A2PACK_E_NO_MEMORY, "{}: the {} column cannot hold {} entries", dir, what, n);
  }
}

}  // namespace

void report_others(const std::string& seg_dir, const std::vector<std::string>& names, bool all,
                   std::vector<Problem>& problems) {
  constexpr std::string_view kSuffix = ".seg.zst";
  for (const auto& name : names) {
    const std::string path = seg_dir + "/" + name;
    const bool seg_like = name.size() > kSuffix.size() &&
                          name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
    if (!seg_like) {
      if (all)
        problems.push_back({path, 0, A2PACK_OK,
                            "not a segment (segments are named NNNNN.seg.zst); not read", true});
      continue;
    }
    const std::string stem = name.substr(0, name.size() - kSuffix.size());
    const bool digits = stem.find_first_not_of("0123456789") == std::string::npos;
    if (digits && stem.size() >= 5 &&
        (stem.size() > 10 || std::strtoull(stem.c_str(), nullptr, 10) > UINT32_MAX))
      problems.push_back({path, 0, A2PACK_E_OUT_OF_RANGE,
                          "not read: the segment number is past 4294967295, the largest a "
                          "segment can have; its records are not decoded"});
    else
      problems.push_back({path, 0, A2PACK_E_CORRUPT,
                          "not read: not a segment name as the logger writes them (five digits "
                          "or more, no extra leading zeros, then .seg.zst); its records are not "
                          "decoded"});
  }
}

Decoded decode_dir(const std::string& dir_in, const DecodeOptions& opts) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::string seg_dir = dir + "/segments";
  {
    ReadFd probe(dir);  // NOT_FOUND naming the folder when it is missing
  }
  Decoded d;
  // Streams: a bad sidecar is a problem, its stream's records are skipped.
  for (uint32_t id : list_sidecars(dir)) {
    std::string path = sidecar_path(dir, id);
    try {
      d.streams.push_back(read_sidecar(path, id));
    } catch (const Error& e) {
      d.problems.push_back({path, 0, e.status(), e.what()});
    }
  }
  ScaleTable scales;
  for (const auto& m : d.streams) {
    if (m.id >= scales.size()) scales.resize(m.id + 1, nullptr);
    scales[m.id] = &m.info;
  }
  auto strict_check = [&] {
    if (opts.strict && !d.problems.empty()) {
      const Problem& p = d.problems.front();
      fail(p.note ? A2PACK_E_CORRUPT : p.status, "{}: offset {}: {}{}", p.path, p.offset,
           p.note ? "note: " : "", p.message);
    }
  };
  std::vector<std::string> others;
  auto seg_ids = list_segments(seg_dir, &others);
  report_others(seg_dir, others, true, d.problems);
  if (seg_ids.empty()) {
    // The single-folder layout: segments directly in the folder, one zstd
    // frame per record (flat_layout.cpp).
    if (flat_layout_dir(dir)) {
      decode_flat_dir(dir, scales, opts, d);
      strict_check();
      return d;
    }
    ReadFd probe(seg_dir);  // a missing segments folder is an error, an empty one is not
  }
  std::vector<std::string> paths;
  for (uint32_t s : seg_ids) paths.push_back(seg_dir + "/" + segment_name(s));
  std::vector<MappedFile> files(paths.size());
  std::vector<std::vector<FrameRef>> seg_frames(paths.size());
  std::vector<std::vector<Problem>> seg_problems(paths.size());
  std::vector<SegmentEnd> ends(paths.size());
  std::vector<uint64_t> seg_bad(paths.size(), 0);

  // 1. Map and scan every segment, and check its frame sequence (parallel
  //    across segments).
  parallel_for(paths.size(), opts.workers, [&](size_t i) {
    try {
      files[i] = MappedFile(paths[i], MappedFile::Advice::sequential);
      scan_segment(files[i].data(), files[i].size(), paths[i], static_cast<uint32_t>(i),
                   seg_frames[i], seg_problems[i]);
      seg_bad[i] = seg_problems[i].size();
      uint64_t skipped = 0;
      ends[i] = check_sequence(paths[i], seg_ids[i], files[i].size(), seg_frames[i],
                               seg_problems[i], skipped);
      seg_bad[i] += skipped;
    } catch (const Error& e) {
      seg_problems[i].push_back({paths[i], 0, e.status(), e.what()});
      ++seg_bad[i];
    }
  });
  std::vector<uint64_t> sizes(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) sizes[i] = files[i].size();
  check_numbering(seg_dir, seg_ids, sizes, d.problems);
  std::vector<Problem> end_problems;
  check_segment_ends(paths, seg_ids, sizes, ends,
                     !paths.empty() && ends.back().sequenced && !ends.back().closed &&
                         folder_in_use(dir),
                     end_problems);
  std::vector<FrameRef> frames;
  for (size_t i = 0; i < paths.size(); ++i) {
    d.file_bytes += files[i].size();
    frames.insert(frames.end(), seg_frames[i].begin(), seg_frames[i].end());
    for (auto& p : seg_problems[i]) d.problems.push_back(std::move(p));
    for (auto& p : end_problems)
      if (p.path == paths[i]) d.problems.push_back(std::move(p));
    d.bad_frames += seg_bad[i];
  }
  d.segments = paths.size();
  strict_check();

  // Problems found from here on, with their frame's place: listed in file
  // order at the end.
  std::vector<std::pair<size_t, Problem>> later;
  auto frame_problem = [&](const FrameRef& f, a2pack_status st, std::string msg) {
    return Problem{paths[f.file], f.offset, st, std::move(msg)};
  };

  // 2. Verify every frame before its counts size anything: payload CRC, the
  //    zstd frame's own content size against the header's raw_len (so
  //    raw_len and the counts it bounds are real), and the per-frame limits.
  const size_t nf = frames.size();
  std::vector<uint8_t> bad(nf, 0);
  std::vector<Problem> verify_problem(nf);
  parallel_for(nf, opts.workers, [&](size_t i) {
    const FrameRef& f = frames[i];
    const BlockHeader& h = f.header;
    const uint8_t* payload = files[f.file].data() + f.offset + h.size();
    try {
      uint32_t crc = crc32c::compute(payload, h.compressed_len);
      if (crc != h.payload_crc)
        fail(A2PACK_E_CHECKSUM, "payload CRC32C mismatch (stored {:#010x}, computed {:#010x})",
             h.payload_crc, crc);
      unsigned long long content = ZSTD_getFrameContentSize(payload, h.compressed_len);
      if (content != h.raw_len)
        fail(A2PACK_E_CORRUPT, "zstd frame content size {} differs from the header's {}",
             static_cast<long long>(content), h.raw_len);
      if (h.raw_len > opts.max_frame_bytes)
        fail(A2PACK_E_OUT_OF_RANGE,
             "the frame decompresses to {} bytes, over the limit of {} per frame "
             "(max_frame_bytes; raise it with --max-frame-bytes)",
             h.raw_len, opts.max_frame_bytes);
      // Plausible for its size before anything is sized from it: zstd can
      // expand a few bytes ~30 000-fold (a 25 KB folder to 134 M records).
      const uint64_t disk = h.size() + h.compressed_len;
      if (opts.max_expansion < UINT64_MAX / disk && h.raw_len > opts.max_expansion * disk)
        fail(A2PACK_E_OUT_OF_RANGE,
             "the frame decompresses to {} bytes, {:.0f} times its {} bytes on disk, over the "
             "limit of {} times (max_expansion; raise it with --max-expansion)",
             h.raw_len, static_cast<double>(h.raw_len) / static_cast<double>(disk), disk,
             opts.max_expansion);
      if (h.n_records > opts.max_frame_records)
        fail(A2PACK_E_OUT_OF_RANGE,
             "the frame holds {} records, over the limit of {} per frame "
             "(max_frame_records; raise it with --max-frame-records)",
             h.n_records, opts.max_frame_records);
    } catch (const Error& e) {
      bad[i] = 1;
      verify_problem[i] = frame_problem(f, e.status(), fmt::format("{}; frame skipped", e.what()));
    }
  });
  for (size_t i = 0; i < nf; ++i)
    if (bad[i]) later.emplace_back(i, std::move(verify_problem[i]));
  verify_problem.clear();

  // 3. The per-decode limits, in file order over the verified frames: from
  //    the frame that would pass one, nothing more is decoded.
  std::vector<size_t> good;
  good.reserve(nf);
  {
    uint64_t recs = 0, bytes = 0;
    for (size_t i = 0; i < nf; ++i) {
      if (bad[i]) continue;
      const BlockHeader& h = frames[i].header;
      const char* which = nullptr;
      const char* unit = nullptr;
      uint64_t limit = 0, have = 0;
      if (recs + h.n_records > opts.max_records) {
        which = "max_records; raise it with --max-records";
        unit = "records";
        limit = opts.max_records;
        have = recs;
      } else if (bytes + h.raw_len > opts.max_bytes) {
        which = "max_bytes; raise it with --max-bytes";
        unit = "decompressed bytes";
        limit = opts.max_bytes;
        have = bytes;
      }
      if (which) {
        size_t skipped = 0;
        uint64_t skipped_recs = 0;
        for (size_t k = i; k < nf; ++k)
          if (!bad[k]) {
            bad[k] = 1;
            ++skipped;
            skipped_recs += frames[k].header.n_records;
          }
        later.emplace_back(
            i, frame_problem(frames[i], A2PACK_E_OUT_OF_RANGE,
                             fmt::format("decode limit reached: {} {} decoded before this frame "
                                         "of {} records and {} bytes, the limit per decode is "
                                         "{} ({}); this frame and the rest ({} frames, {} "
                                         "records) are not decoded",
                                         have, unit, h.n_records, h.raw_len, limit, which,
                                         skipped, skipped_recs)));
        break;
      }
      recs += h.n_records;
      bytes += h.raw_len;
      good.push_back(i);
    }
    // Reserve the columns for every verified frame when that fits in
    // physical memory (address space only): honest folders then never copy.
    uint64_t vals = 0;
    for (size_t i : good) vals += frames[i].header.n_values;
    if (column_bytes(recs, vals) <= physical_bytes() / 2) {
      try {
        d.stream_ids.reserve(recs);
        d.epochs.reserve(recs);
        d.offsets.reserve(recs + 1);
        d.indices.reserve(vals);
        d.values.reserve(vals);
      } catch (const std::bad_alloc&) {
        // Not fatal: the windows below grow the columns as they go.
      }
    }
  }
  d.offsets[0] = 0;

  // 4. Decompress and decode the frames window by window (frames whose
  //    counts lie fail the parse, and never hold more than one window's
  //    worth of memory: their claims are given back after it), each
  //    window's frames in parallel straight into their place (one reused
  //    buffer per worker, so the bytes are parsed while still in cache).
  std::vector<FrameCount> counts(nf);
  unsigned nworkers = resolve_workers(opts.workers);
  std::vector<ZSTD_DCtx*> dctx(nworkers, nullptr);
  std::vector<std::unique_ptr<uint8_t[]>> scratch(nworkers);
  std::vector<size_t> scratch_size(nworkers, 0);
  std::vector<Problem> decode_problem(nf);
  struct CtxFree {
    std::vector<ZSTD_DCtx*>& v;
    ~CtxFree() {
      for (auto* c : v) ZSTD_freeDCtx(c);
    }
  } ctx_free{dctx};
  std::vector<uint64_t> rec_base, val_base;
  size_t gi = 0;
  while (gi < good.size()) {
    size_t ge = gi;
    uint64_t wr = 0, wv = 0;
    rec_base.clear();
    val_base.clear();
    while (ge < good.size() && (ge == gi || column_bytes(wr, wv) < opts.window_bytes)) {
      const BlockHeader& h = frames[good[ge]].header;
      rec_base.push_back(wr);
      val_base.push_back(wv);
      wr += h.n_records;
      wv += h.n_values;
      ++ge;
    }
    const size_t rec0 = d.stream_ids.size(), val0 = d.indices.size();
    grow(d.stream_ids, rec0 + wr, dir, "stream id");
    grow(d.epochs, rec0 + wr, dir, "epoch");
    grow(d.offsets, rec0 + wr + 1, dir, "offset");
    grow(d.indices, val0 + wv, dir, "index");
    grow(d.values, val0 + wv, dir, "value");
    parallel_for_worker(
        ge - gi, opts.workers,
        [&](unsigned w, size_t k) {
          const size_t i = good[gi + k];
          const FrameRef& f = frames[i];
          const BlockHeader& h = f.header;
          const uint8_t* payload = files[f.file].data() + f.offset + h.size();
          try {
            if (!dctx[w] && !(dctx[w] = ZSTD_createDCtx()))
              fail(A2PACK_E_NO_MEMORY, "out of memory creating a zstd context");
            if (scratch_size[w] < h.raw_len) {
              scratch[w].reset();
              scratch_size[w] = 0;
              try {
                scratch[w].reset(new uint8_t[h.raw_len]);
              } catch (const std::bad_alloc&) {
                fail(A2PACK_E_NO_MEMORY, "out of memory allocating {} bytes to decompress the frame",
                     h.raw_len);
              }
              scratch_size[w] = h.raw_len;
            }
            uint8_t* raw = scratch[w].get();
            size_t r = ZSTD_decompressDCtx(dctx[w], raw, h.raw_len, payload, h.compressed_len);
            if (ZSTD_isError(r)) fail(A2PACK_E_CORRUPT, "zstd: {}", ZSTD_getErrorName(r));
            if (r != h.raw_len)
              fail(A2PACK_E_CORRUPT, "decompressed {} bytes, the header says {}", r, h.raw_len);
            const size_t rb = rec0 + rec_base[k], vb = val0 + val_base[k];
            FrameSink sink{d.stream_ids.data() + rb, d.epochs.data() + rb,
                           d.offsets.data() + rb + 1, d.indices.data() + vb,
                           d.values.data() + vb,     vb,
                           h.n_records,              h.n_values};
            counts[i] = decode_frame(h.payload_version(), raw, r, h.n_records, scales, sink);
            if (counts[i].parsed_values != h.n_values)
              fail(A2PACK_E_CORRUPT, "the frame holds {} non-zeros, its header says {}",
                   counts[i].parsed_values, h.n_values);
          } catch (const Error& e) {
            bad[i] = 1;
            decode_problem[i] =
                frame_problem(f, e.status(), fmt::format("{}; frame skipped", e.what()));
            counts[i] = FrameCount{};
          }
        },
        1);
    // Close the gaps left by frames that failed or skipped records (rare:
    // only damaged or incomplete folders), then shrink to what was decoded.
    size_t r_out = rec0, v_out = val0;
    for (size_t k = 0; k < ge - gi; ++k) {
      const size_t i = good[gi + k];
      const size_t nr = counts[i].records, nv = counts[i].values;
      const size_t rb = rec0 + rec_base[k], vb = val0 + val_base[k];
      if (nr && (rb != r_out || vb != v_out)) {
        std::memmove(d.stream_ids.data() + r_out, d.stream_ids.data() + rb, nr * sizeof(uint32_t));
        std::memmove(d.epochs.data() + r_out, d.epochs.data() + rb, nr * sizeof(double));
        for (size_t q = 0; q < nr; ++q)
          d.offsets[r_out + q + 1] = d.offsets[rb + q + 1] - vb + v_out;
      }
      if (nv && vb != v_out) {
        std::memmove(d.indices.data() + v_out, d.indices.data() + vb, nv * sizeof(uint32_t));
        std::memmove(d.values.data() + v_out, d.values.data() + vb, nv * sizeof(double));
      }
      r_out += nr;
      v_out += nv;
    }
    d.stream_ids.resize(r_out);
    d.epochs.resize(r_out);
    d.offsets.resize(r_out + 1);
    d.indices.resize(v_out);
    d.values.resize(v_out);
    gi = ge;
  }
  scratch.clear();

  // 5. Problems in file order.
  for (size_t i = 0; i < nf; ++i) {
    if (bad[i]) {
      if (!decode_problem[i].message.empty()) later.emplace_back(i, std::move(decode_problem[i]));
      ++d.bad_frames;
    } else {
      ++d.frames;
      d.raw_bytes += frames[i].header.raw_len;
      if (counts[i].skipped_unknown)
        later.emplace_back(
            i, Problem{paths[frames[i].file], frames[i].offset, A2PACK_E_NOT_FOUND,
                       fmt::format("{} records skipped: no sidecar for stream {}{}",
                                   counts[i].skipped_unknown, counts[i].first_unknown,
                                   counts[i].skipped_unknown > 1 ? " (and maybe others)" : "")});
    }
  }
  std::stable_sort(later.begin(), later.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [i, p] : later) d.problems.push_back(std::move(p));
  strict_check();
  return d;
}

}  // namespace a2pack::logger
