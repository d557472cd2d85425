#include "logger/decoder.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <zstd.h>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "logger/cpu_features.hpp"
#include "logger/target_region.hpp"
#include "logger/encoder.hpp"  // FrameState: the bulk parser's predictor arena
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

namespace {

// decode_frame: a portable build and one for BMI2, AVX2 and FMA (pext packs
// the varint groups, the value predictor runs four lanes wide, FMA replaces
// divisions, and version 2 goes through the bulk parser first), chosen once
// at start-up.
namespace generic {
#include "logger/decode_body.inc"
}  // namespace generic
#if defined(__x86_64__)
A2PACK_TARGET_BEGIN("bmi,bmi2,avx,avx2,fma")
#define A2PACK_LOGGER_PEXT 1
#define A2PACK_LOGGER_AVX2 1
namespace fast {
#include "logger/decode_body.inc"
#include "logger/decode_bulk.inc"
}  // namespace fast
#undef A2PACK_LOGGER_AVX2
#undef A2PACK_LOGGER_PEXT
A2PACK_TARGET_END
// The same again with AVX-512 (F, VL, BW, DQ) for the bulk parser's varint
// groups, predictor masks and int64 -> double conversion (decode_bulk.inc).
A2PACK_TARGET_BEGIN("bmi,bmi2,avx,avx2,fma,avx512f,avx512vl,avx512bw,avx512dq")
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (their
// _mm512_undefined_* placeholders); nothing of ours is silenced by this.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define A2PACK_LOGGER_PEXT 1
#define A2PACK_LOGGER_AVX2 1
#define A2PACK_LOGGER_AVX512 1
namespace fast512 {
#include "logger/decode_body.inc"
#include "logger/decode_bulk.inc"
}  // namespace fast512
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef A2PACK_LOGGER_AVX512
#undef A2PACK_LOGGER_AVX2
#undef A2PACK_LOGGER_PEXT
A2PACK_TARGET_END
#endif

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
  if (version < kOldestVersion || version > kFormatVersion)
    fail(A2PACK_E_UNSUPPORTED, "frame format version {} (this library reads {} to {})", version,
         kOldestVersion, kFormatVersion);
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
  auto strict_check = [&] {
    if (opts.strict && !d.problems.empty()) {
      const Problem& p = d.problems.front();
      fail(p.status, "{}: offset {}: {}", p.path, p.offset, p.message);
    }
  };
  strict_check();

  // 2. Reserve each frame's place in the columns from its header's counts
  //    (verified by the header CRC; bounded by its raw length).
  const size_t nf = frames.size();
  std::vector<uint64_t> rec_base(nf + 1, 0), val_base(nf + 1, 0);
  for (size_t i = 0; i < nf; ++i) {
    rec_base[i + 1] = rec_base[i] + frames[i].header.n_records;
    val_base[i + 1] = val_base[i] + frames[i].header.n_values;
  }
  d.stream_ids.resize(rec_base[nf]);
  d.epochs.resize(rec_base[nf]);
  d.offsets.resize(rec_base[nf] + 1);
  d.indices.resize(val_base[nf]);
  d.values.resize(val_base[nf]);
  d.offsets[0] = 0;

  // 3. Check, decompress and decode every frame straight into its place
  //    (parallel across frames; one reused buffer per worker, so the bytes
  //    are parsed while still in cache).
  std::vector<FrameCount> counts(nf);
  std::vector<Problem> frame_problem(nf);
  std::vector<uint8_t> bad(nf, 0);
  unsigned nworkers = resolve_workers(opts.workers);
  std::vector<ZSTD_DCtx*> dctx(nworkers, nullptr);
  std::vector<std::unique_ptr<uint8_t[]>> scratch(nworkers);
  std::vector<size_t> scratch_size(nworkers, 0);
  parallel_for_worker(
      nf, opts.workers,
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
          if (scratch_size[w] < h.raw_len) {
            scratch[w].reset(new uint8_t[h.raw_len]);
            scratch_size[w] = h.raw_len;
          }
          uint8_t* raw = scratch[w].get();
          size_t r = ZSTD_decompressDCtx(dctx[w], raw, h.raw_len, payload, h.compressed_len);
          if (ZSTD_isError(r)) fail(A2PACK_E_CORRUPT, "zstd: {}", ZSTD_getErrorName(r));
          if (r != h.raw_len)
            fail(A2PACK_E_CORRUPT, "decompressed {} bytes, the header says {}", r, h.raw_len);
          FrameSink sink{d.stream_ids.data() + rec_base[i], d.epochs.data() + rec_base[i],
                         d.offsets.data() + rec_base[i] + 1, d.indices.data() + val_base[i],
                         d.values.data() + val_base[i], val_base[i], h.n_records, h.n_values};
          counts[i] = decode_frame(h.version, raw, r, h.n_records, scales, sink);
          if (counts[i].parsed_values != h.n_values)
            fail(A2PACK_E_CORRUPT, "the frame holds {} non-zeros, its header says {}",
                 counts[i].parsed_values, h.n_values);
        } catch (const Error& e) {
          bad[i] = 1;
          frame_problem[i] = {paths[f.file], f.offset, e.status(),
                              fmt::format("{}; frame skipped", e.what())};
          counts[i] = FrameCount{};
        }
      },
      1);
  for (auto* c : dctx) ZSTD_freeDCtx(c);
  scratch.clear();

  // 5. Problems in file order, then close the gaps left by frames that
  //    failed or skipped records (rare: only damaged or incomplete folders).
  bool gaps = false;
  for (size_t i = 0; i < nf; ++i) {
    if (bad[i]) {
      d.problems.push_back(std::move(frame_problem[i]));
      ++d.bad_frames;
    } else {
      ++d.frames;
      d.raw_bytes += frames[i].header.raw_len;
      if (counts[i].skipped_unknown)
        d.problems.push_back(
            {paths[frames[i].file], frames[i].offset, A2PACK_E_NOT_FOUND,
             fmt::format("{} records skipped: no sidecar for stream {}{}",
                         counts[i].skipped_unknown, counts[i].first_unknown,
                         counts[i].skipped_unknown > 1 ? " (and maybe others)" : "")});
    }
    gaps |= counts[i].records != rec_base[i + 1] - rec_base[i] ||
            counts[i].values != val_base[i + 1] - val_base[i];
  }
  strict_check();
  if (gaps) {
    size_t r_out = 0, v_out = 0;
    for (size_t i = 0; i < nf; ++i) {
      size_t nr = counts[i].records, nv = counts[i].values;
      size_t rb = rec_base[i], vb = val_base[i];
      if (nr) {
        std::memmove(d.stream_ids.data() + r_out, d.stream_ids.data() + rb, nr * sizeof(uint32_t));
        std::memmove(d.epochs.data() + r_out, d.epochs.data() + rb, nr * sizeof(double));
        for (size_t k = 0; k < nr; ++k) d.offsets[r_out + k + 1] = d.offsets[rb + k + 1] - vb + v_out;
      }
      if (nv) {
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
  }
  return d;
}

}  // namespace a2pack::logger
