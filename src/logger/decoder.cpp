#include "logger/decoder.hpp"

#include <cstring>
#include <mutex>

#include <zstd.h>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/varint.hpp"
#include "base/worker_pool.hpp"
#include "logger/segment.hpp"

namespace a2pack::logger {

namespace {

// Position of the next header (prefix and header CRC both good) at or after
// `from`, or `size` when none.
size_t find_next_header(const uint8_t* data, size_t size, size_t from) {
  while (from + kHeaderSize <= size) {
    const void* hit = ::memmem(data + from, size - from, kHeaderPrefix, sizeof kHeaderPrefix);
    if (!hit) return size;
    size_t pos = static_cast<size_t>(static_cast<const uint8_t*>(hit) - data);
    if (pos + kHeaderSize > size) return size;
    BlockHeader h;
    if (read_header(data + pos, h) != HeaderCheck::bad_prefix &&
        read_header(data + pos, h) != HeaderCheck::bad_crc)
      return pos;
    from = pos + 1;
  }
  return size;
}

const char* header_problem(HeaderCheck c) {
  switch (c) {
    case HeaderCheck::bad_prefix: return "no frame header (bad magic)";
    case HeaderCheck::bad_crc: return "frame header CRC32C mismatch";
    case HeaderCheck::bad_version: return "frame header of an unsupported format version";
    case HeaderCheck::bad_fields: return "frame header with impossible fields";
    default: return "frame header ok";
  }
}

[[noreturn]] void bad_record(uint32_t i, const char* what) {
  fail(A2PACK_E_CORRUPT, "record {}: {}", i, what);
}

template <unsigned Bits>
inline uint64_t get(const uint8_t*& p, const uint8_t* end, uint32_t rec, const char* field) {
  uint64_t v;
  auto r = varint::read<Bits>(p, end, v);
  if (r != varint::Result::ok) [[unlikely]] {
    fail(A2PACK_E_CORRUPT, "record {}: {} varint {}", rec, field,
         r == varint::Result::truncated ? "runs past the end of the frame" : "is overlong");
  }
  return v;
}

}  // namespace

void scan_segment(const uint8_t* data, size_t size, const std::string& path, uint32_t file,
                  std::vector<FrameRef>& frames, std::vector<Problem>& problems) {
  size_t pos = 0;
  while (pos < size) {
    if (size - pos < kHeaderSize) {
      problems.push_back({path, pos, A2PACK_E_CORRUPT,
                          fmt::format("{} trailing bytes, too few for a frame header (a torn "
                                      "write); skipped",
                                      size - pos)});
      return;
    }
    BlockHeader h;
    HeaderCheck c = read_header(data + pos, h);
    if (c == HeaderCheck::ok) {
      if (h.compressed_len <= size - pos - kHeaderSize) {
        frames.push_back({file, pos, h});
        pos += kHeaderSize + h.compressed_len;
        continue;
      }
      size_t next = find_next_header(data, size, pos + 1);
      problems.push_back(
          {path, pos, A2PACK_E_CORRUPT,
           fmt::format("truncated frame: the header announces {} compressed bytes, {} remain{} "
                       "(a write cut short, e.g. by a crash); frame skipped",
                       h.compressed_len, size - pos - kHeaderSize,
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

void decode_records(const uint8_t* raw, size_t len, uint32_t n_records, const ScaleTable& scales,
                    FrameRecords& out) {
  const uint8_t* p = raw;
  const uint8_t* end = raw + len;
  // Upper bounds: every index and every value takes at least one byte.
  size_t max_values = len / 2;
  out.stream_ids.resize(n_records);
  out.epochs.resize(n_records);
  out.offsets.resize(static_cast<size_t>(n_records) + 1);
  out.indices.resize(max_values);
  out.values.resize(max_values);
  out.offsets[0] = 0;
  out.skipped_unknown = 0;
  // Frame-local delta bases (docs/logger.md): tick of the last record of each
  // stream in this frame, 0 before the first.
  struct Base {
    uint64_t tick;
    uint32_t stamp;
  };
  thread_local std::vector<Base> bases;
  thread_local uint32_t stamp = 0;
  if (++stamp == 0) {
    bases.assign(bases.size(), Base{0, 0});
    stamp = 1;
  }
  uint32_t* ids = out.stream_ids.data();
  double* epochs = out.epochs.data();
  uint64_t* offs = out.offsets.data();
  uint32_t* idx = out.indices.data();
  double* val = out.values.data();
  size_t nv = 0, kept = 0;
  for (uint32_t r = 0; r < n_records; ++r) {
    uint64_t sid = get<32>(p, end, r, "stream id");
    uint64_t zz = get<64>(p, end, r, "epoch delta");
    uint64_t n = get<32>(p, end, r, "count");
    if (n > static_cast<uint64_t>(end - p) / 2 || n > kMaxRecordValues) bad_record(r, "count larger than the bytes left");
    const StreamInfo* s = sid < scales.size() ? scales[sid] : nullptr;
    uint64_t tick = 0;
    if (s) {  // unknown streams are skipped, their ticks never matter
      if (sid >= bases.size()) bases.resize(scales.size(), Base{0, 0});
      Base& b = bases[sid];
      uint64_t base = b.stamp == stamp ? b.tick : 0;
      tick = base + static_cast<uint64_t>(varint::zigzag_decode(zz));  // wraps like the encoder
      b = {tick, stamp};
    }
    uint32_t* oi = idx + nv;
    if (n) {
      uint64_t cur = get<32>(p, end, r, "first index");
      oi[0] = static_cast<uint32_t>(cur);
      for (uint64_t i = 1; i < n; ++i) {
        uint64_t gap = get<32>(p, end, r, "index gap");
        cur += gap + 1;
        if (cur > UINT32_MAX) [[unlikely]]
          bad_record(r, "indices run past 2^32 - 1");
        oi[i] = static_cast<uint32_t>(cur);
      }
      double vs = s ? s->value_scale : 0.0;
      double* ov = val + nv;
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t q;
        // Fast path: one-byte values are the common case.
        if (p < end && *p < 0x80) q = *p++;
        else q = get<64>(p, end, r, "value");
        ov[i] = static_cast<double>(varint::zigzag_decode(q)) * vs;
      }
    }
    if (!s) {
      if (!out.skipped_unknown) out.first_unknown = static_cast<uint32_t>(sid);
      ++out.skipped_unknown;
      continue;  // parsed (to reach the next record) but not kept
    }
    ids[kept] = static_cast<uint32_t>(sid);
    epochs[kept] = static_cast<double>(static_cast<int64_t>(tick)) * s->epoch_scale;
    nv += n;
    offs[++kept] = nv;
  }
  if (p != end)
    fail(A2PACK_E_CORRUPT, "{} bytes left after the {} records the header announces",
         end - p, n_records);
  out.stream_ids.resize(kept);
  out.epochs.resize(kept);
  out.offsets.resize(kept + 1);
  out.indices.resize(nv);
  out.values.resize(nv);
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
  auto seg_ids = list_segments(seg_dir);
  if (seg_ids.empty()) {
    ReadFd probe(seg_dir);  // a missing segments folder is an error, an empty one is not
  }
  std::vector<std::string> paths;
  for (uint32_t s : seg_ids) paths.push_back(seg_dir + "/" + segment_name(s));
  std::vector<MappedFile> files(paths.size());
  std::vector<std::vector<FrameRef>> seg_frames(paths.size());
  std::vector<std::vector<Problem>> seg_problems(paths.size());

  // 1. Map and scan every segment (parallel across segments).
  parallel_for(paths.size(), opts.workers, [&](size_t i) {
    try {
      files[i] = MappedFile(paths[i], MappedFile::Advice::sequential);
      scan_segment(files[i].data(), files[i].size(), paths[i], static_cast<uint32_t>(i),
                   seg_frames[i], seg_problems[i]);
    } catch (const Error& e) {
      seg_problems[i].push_back({paths[i], 0, e.status(), e.what()});
    }
  });
  std::vector<FrameRef> frames;
  for (size_t i = 0; i < paths.size(); ++i) {
    d.file_bytes += files[i].size();
    frames.insert(frames.end(), seg_frames[i].begin(), seg_frames[i].end());
    for (auto& p : seg_problems[i]) d.problems.push_back(std::move(p));
    d.bad_frames += seg_problems[i].size();
  }
  d.segments = paths.size();
  if (opts.strict && !d.problems.empty()) {
    const Problem& p = d.problems.front();
    fail(p.status, "{}: offset {}: {}", p.path, p.offset, p.message);
  }

  // 2. Check, decompress and decode every frame (parallel across frames).
  std::vector<FrameRecords> out(frames.size());
  std::vector<Problem> frame_problem(frames.size());
  std::vector<uint8_t> frame_bad(frames.size(), 0);
  unsigned nworkers = resolve_workers(opts.workers);
  std::vector<ZSTD_DCtx*> dctx(nworkers, nullptr);
  std::vector<std::vector<uint8_t>> scratch(nworkers);
  parallel_for_worker(
      frames.size(), opts.workers,
      [&](unsigned w, size_t i) {
        const FrameRef& f = frames[i];
        const uint8_t* payload = files[f.file].data() + f.offset + kHeaderSize;
        const BlockHeader& h = f.header;
        try {
          uint32_t crc = crc32c::compute(payload, h.compressed_len);
          if (crc != h.payload_crc)
            fail(A2PACK_E_CHECKSUM, "payload CRC32C mismatch (stored {:#010x}, computed {:#010x})",
                 h.payload_crc, crc);
          unsigned long long content = ZSTD_getFrameContentSize(payload, h.compressed_len);
          if (content != h.raw_len)
            fail(A2PACK_E_CORRUPT, "zstd frame content size {} differs from the header's {}",
                 static_cast<long long>(content), h.raw_len);
          if (!dctx[w] && !(dctx[w] = ZSTD_createDCtx()))
            fail(A2PACK_E_NO_MEMORY, "cannot create a zstd context");
          auto& buf = scratch[w];
          if (buf.size() < h.raw_len) buf.resize(h.raw_len);
          size_t r = ZSTD_decompressDCtx(dctx[w], buf.data(), h.raw_len, payload, h.compressed_len);
          if (ZSTD_isError(r))
            fail(A2PACK_E_CORRUPT, "zstd: {}", ZSTD_getErrorName(r));
          if (r != h.raw_len)
            fail(A2PACK_E_CORRUPT, "decompressed {} bytes, the header says {}", r, h.raw_len);
          decode_records(buf.data(), r, h.n_records, scales, out[i]);
        } catch (const Error& e) {
          frame_bad[i] = 1;
          frame_problem[i] = {paths[f.file], f.offset, e.status(),
                              fmt::format("{}; frame skipped", e.what())};
          out[i] = FrameRecords{};
        }
      },
      1);
  for (auto* c : dctx) ZSTD_freeDCtx(c);

  // 3. Stitch the frames' columns together (parallel copy).
  std::vector<uint64_t> rec_base(frames.size() + 1, 0), val_base(frames.size() + 1, 0);
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frame_bad[i]) {
      d.problems.push_back(std::move(frame_problem[i]));
      ++d.bad_frames;
    } else {
      ++d.frames;
      d.raw_bytes += frames[i].header.raw_len;
      if (out[i].skipped_unknown)
        d.problems.push_back(
            {paths[frames[i].file], frames[i].offset, A2PACK_E_NOT_FOUND,
             fmt::format("{} records skipped: no sidecar for stream {}{}",
                         out[i].skipped_unknown, out[i].first_unknown,
                         out[i].skipped_unknown > 1 ? " (and maybe others)" : "")});
    }
    rec_base[i + 1] = rec_base[i] + out[i].stream_ids.size();
    val_base[i + 1] = val_base[i] + out[i].indices.size();
  }
  if (opts.strict && !d.problems.empty()) {
    const Problem& p = d.problems.front();
    fail(p.status, "{}: offset {}: {}", p.path, p.offset, p.message);
  }
  size_t nr = rec_base.back(), nv = val_base.back();
  d.stream_ids.resize(nr);
  d.epochs.resize(nr);
  d.offsets.resize(nr + 1);
  d.indices.resize(nv);
  d.values.resize(nv);
  d.offsets[0] = 0;
  parallel_for(frames.size(), opts.workers, [&](size_t i) {
    FrameRecords& f = out[i];
    size_t rb = rec_base[i], vb = val_base[i], n = f.stream_ids.size();
    if (n) {
      std::memcpy(d.stream_ids.data() + rb, f.stream_ids.data(), n * sizeof(uint32_t));
      std::memcpy(d.epochs.data() + rb, f.epochs.data(), n * sizeof(double));
      for (size_t k = 0; k < n; ++k) d.offsets[rb + k + 1] = vb + f.offsets[k + 1];
    }
    size_t m = f.indices.size();
    if (m) {
      std::memcpy(d.indices.data() + vb, f.indices.data(), m * sizeof(uint32_t));
      std::memcpy(d.values.data() + vb, f.values.data(), m * sizeof(double));
    }
    f = FrameRecords{};  // free as we go
  });
  return d;
}

}  // namespace a2pack::logger
