// Data logger benchmarks (docs/logger.md has the measured table).
//
//   BM_Encode/n/kind       the work record() does on the caller's thread:
//                          validate + quantise + predict + varint-encode into
//                          a frame's two regions, format v2 (no compression,
//                          no I/O)
//   BM_EncodeV1/16/kind    the same in format v1 (the single-folder layout's
//                          one-region records, absolute values): the predictor's cost
//   BM_Record/n            record() itself through the Logger (slot lookup,
//                          spin lock, encode) with the writer on the other core
//                          and compression off the clock: per-call cost only
//   BM_ToDisk/n/threads    end to end: open, record, close (compressed, on
//                          disk, fdatasync'ed); records/s sustained
//                          (huffman:1 = Huffman-coded literals, not the default)
//   BM_FramePerRecord/n    the single-folder layout: one zstd frame per record
//                          (compression included, no I/O), for comparison
//   BM_Decode/workers      decode_dir over a prepared log; bytes/s counts the
//                          decompressed frame bytes
//   BM_DecodeFramesWarm    the same frames checked, decompressed and parsed
//                          into reused memory on one core (no page faults), of
//                          logs written at zstd -1, 1 and 1 with huffman:1
//   BM_DecompressFramesOnly  the CRC checks and zstd alone on the same frames:
//                          the ceiling of BM_DecodeFramesWarm
//   BM_ParseFrames         the parser alone (frames decompressed up front):
//                          the checked parser against the bulk one
//   BM_FrameCompress       zstd levels on the encoded frames: MB/s and size
// Counters: bytes_per_record for ours (file bytes incl. headers) and for the
// single-folder layout's one frame per record on the same records (its own record
// encoding, format v1's: absolute values, epoch deltas across the run).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <thread>

#include <zstd.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "base/crc32c.hpp"
#include "base/file_io.hpp"
#include "base/varint.hpp"
#include "logger/decoder.hpp"
#include "logger/encoder.hpp"
#include "logger/logger.hpp"

using namespace a2pack;
using namespace a2pack::logger;
namespace fs = std::filesystem;

namespace {

// Two workloads, both reported (docs/logger.md):
//  sim    — what a simulation logs: 64 streams (entities) recorded round-robin,
//           each with a sparse support of n indices that drifts slowly (5% of
//           indices replaced per record) and values that random-walk
//           (steps ~N(0, 0.02), value_scale 1e-3), epochs every 0.1 s.
//  random — worst case: one stream, fresh random supports and i.i.d. N(0, 1)
//           values at value_scale 1e-4: near its entropy, no format can
//           compress it much.
// Pools hold at least 4 MB of encoded records, so a 256 KiB frame never sees
// the same record twice.
enum Kind { kSim = 0, kRandom = 1 };
const char* kind_name(int k) { return k == kSim ? "sim" : "random"; }

struct Workload {
  size_t n = 0;
  size_t count = 0;
  double epoch_scale = 1e-3, value_scale = 1e-3;
  uint32_t n_streams = 1;
  std::vector<uint32_t> sids;  // count: stream index (0 .. n_streams-1)
  std::vector<double> epochs;  // count
  std::vector<uint32_t> idx;   // count * n
  std::vector<double> val;     // count * n
  const uint32_t* indices(size_t r) const { return idx.data() + r * n; }
  const double* values(size_t r) const { return val.data() + r * n; }
};

std::vector<uint32_t> random_support(std::mt19937_64& rng, size_t n, uint32_t universe) {
  std::vector<uint32_t> pick;
  while (pick.size() < n) {
    uint32_t x = static_cast<uint32_t>(rng() % universe);
    if (std::find(pick.begin(), pick.end(), x) == pick.end()) pick.push_back(x);
  }
  std::sort(pick.begin(), pick.end());
  return pick;
}

const Workload& workload(size_t n, int kind) {
  static std::map<std::pair<size_t, int>, Workload> cache;
  auto key = std::make_pair(n, kind);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Workload w;
  w.n = n;
  w.count = std::max<size_t>(1024, (4u << 20) / (n * 3 + 6));
  std::mt19937_64 rng(n * 2 + static_cast<size_t>(kind));
  std::normal_distribution<double> nd(0.0, 1.0);
  uint32_t universe = static_cast<uint32_t>(std::max<size_t>(1024, n * 16));
  if (kind == kRandom) {
    w.value_scale = 1e-4;
    for (size_t r = 0; r < w.count; ++r) {
      for (uint32_t x : random_support(rng, n, universe)) {
        w.idx.push_back(x);
        w.val.push_back(nd(rng));
      }
      w.sids.push_back(0);
      w.epochs.push_back(static_cast<double>(r) * 0.01);
    }
  } else {
    w.n_streams = 64;
    struct State {
      std::vector<uint32_t> support;
      std::vector<double> value;
    };
    std::vector<State> st(w.n_streams);
    for (auto& s : st) {
      s.support = random_support(rng, n, universe);
      for (size_t k = 0; k < n; ++k) s.value.push_back(nd(rng));
    }
    for (size_t r = 0; r < w.count; ++r) {
      uint32_t sid = static_cast<uint32_t>(r % w.n_streams);
      State& s = st[sid];
      for (size_t k = 0; k < n; ++k) {
        if (rng() % 20 == 0) {  // replace this index by one not in the support
          uint32_t x;
          do x = static_cast<uint32_t>(rng() % universe);
          while (std::find(s.support.begin(), s.support.end(), x) != s.support.end());
          s.support[k] = x;
          s.value[k] = nd(rng);
        }
        s.value[k] += 0.02 * nd(rng);
      }
      std::vector<size_t> order(n);
      for (size_t k = 0; k < n; ++k) order[k] = k;
      std::sort(order.begin(), order.end(),
                [&](size_t a, size_t b) { return s.support[a] < s.support[b]; });
      for (size_t k : order) {
        w.idx.push_back(s.support[k]);
        w.val.push_back(s.value[k]);
      }
      w.sids.push_back(sid);
      w.epochs.push_back(static_cast<double>(r / w.n_streams) * 0.1);
    }
  }
  return cache.emplace(key, std::move(w)).first->second;
}

// Stream ids for a workload in a logger.
std::vector<uint32_t> register_streams(Logger& lg, const Workload& w) {
  std::vector<uint32_t> ids;
  for (uint32_t s = 0; s < w.n_streams; ++s)
    ids.push_back(lg.register_stream(fmt::format("{{\"entity\":{}}}", s), w.epoch_scale,
                                     w.value_scale, 0));
  return ids;
}

// Epoch of the k-th pass over the pool: later passes continue in time.
double epoch_of(const Workload& w, size_t r, size_t pass) {
  return w.epochs[r] + static_cast<double>(pass) * (w.epochs.back() + 1.0);
}

std::string temp_dir(const char* tag) {
  auto p = fs::temp_directory_path() / fmt::format("a2pack-bench-logger-{}-{}", tag, ::getpid());
  fs::remove_all(p);
  return p.string();
}

void BM_Encode(benchmark::State& state) {
  const Workload& w = workload(static_cast<size_t>(state.range(0)), static_cast<int>(state.range(1)));
  state.SetLabel(kind_name(static_cast<int>(state.range(1))));
  std::vector<StreamInfo> si(w.n_streams, StreamInfo{w.epoch_scale, w.value_scale, 0});
  // A frame's two regions as the logger keeps them (format version 2).
  const size_t frame = 256 << 10;
  std::vector<uint8_t> sbuf(frame), vbuf(frame);
  FrameState st;
  st.new_frame();
  uint8_t* sp = sbuf.data();
  uint8_t* vp = vbuf.data();
  size_t r = 0, pass = 0;
  uint64_t raw = 0;
  const size_t need = max_record_bytes(w.n);
  auto used = [&] { return kV2Prefix + static_cast<size_t>(sp - sbuf.data()) +
                           static_cast<size_t>(vp - vbuf.data()); };
  for (auto _ : state) {
    if (frame - used() < need) {
      raw += used();
      sp = sbuf.data();
      vp = vbuf.data();
      st.new_frame();
    }
    uint32_t sid = w.sids[r];
    encode_record_v2(sp, vp, sid, si[sid], epoch_of(w, r, pass), st, w.indices(r), w.values(r),
                     w.n, nullptr);
    if (++r == w.count) {
      r = 0;
      ++pass;
    }
  }
  raw += used();
  benchmark::DoNotOptimize(sbuf.data());
  benchmark::DoNotOptimize(vbuf.data());
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(raw));
  state.counters["raw_bytes_per_record"] =
      static_cast<double>(raw) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_Encode)->ArgNames({"n", "random"})->ArgsProduct({{1, 16, 256}, {kSim, kRandom}});

// The same caller-thread work in format version 1 (the single-folder layout's record,
// one region, absolute values): what version 2's predictor costs per record.
void BM_EncodeV1(benchmark::State& state) {
  const Workload& w = workload(static_cast<size_t>(state.range(0)), static_cast<int>(state.range(1)));
  state.SetLabel(kind_name(static_cast<int>(state.range(1))));
  std::vector<StreamInfo> si(w.n_streams, StreamInfo{w.epoch_scale, w.value_scale, 0});
  const size_t frame = 256 << 10;
  std::vector<uint8_t> buf(frame);
  std::vector<int64_t> base(w.n_streams, 0);  // per-stream tick base, restarted per frame
  uint8_t* p = buf.data();
  size_t r = 0, pass = 0;
  uint64_t raw = 0;
  const size_t need = max_record_bytes(w.n);
  for (auto _ : state) {
    if (frame - static_cast<size_t>(p - buf.data()) < need) {
      raw += static_cast<uint64_t>(p - buf.data());
      p = buf.data();
      std::fill(base.begin(), base.end(), 0);
    }
    uint32_t sid = w.sids[r];
    int64_t tick = 0;
    p = encode_record(p, sid, si[sid], epoch_of(w, r, pass), base[sid], w.indices(r), w.values(r),
                      w.n, &tick, nullptr);
    base[sid] = tick;
    if (++r == w.count) {
      r = 0;
      ++pass;
    }
  }
  raw += static_cast<uint64_t>(p - buf.data());
  benchmark::DoNotOptimize(buf.data());
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(raw));
  state.counters["raw_bytes_per_record"] =
      static_cast<double>(raw) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_EncodeV1)->ArgNames({"n", "random"})->ArgsProduct({{16}, {kSim, kRandom}});

// record() on the caller thread only. The ring is large enough that the
// writer never makes record() wait during the timed loop; close happens off
// the clock.
void BM_Record(benchmark::State& state) {
  const Workload& w = workload(static_cast<size_t>(state.range(0)), kSim);
  std::string dir = temp_dir("record");
  Options o;
  o.ring_bytes = 1ull << 30;
  {
    Logger lg(dir, o);
    auto ids = register_streams(lg, w);
    size_t r = 0, pass = 0;
    for (auto _ : state) {
      lg.record(ids[w.sids[r]], epoch_of(w, r, pass), w.indices(r), w.values(r), w.n);
      if (++r == w.count) {
        r = 0;
        ++pass;
      }
    }
    state.SetItemsProcessed(state.iterations());
    lg.close();  // after the timed loop: off the clock
    state.counters["full_events"] = static_cast<double>(lg.stats().full_events);
  }
  fs::remove_all(dir);
}
BENCHMARK(BM_Record)->Arg(1)->Arg(16)->Arg(256)->Iterations(2'000'000);

// Bytes of the same records in the single-folder layout: each record its own zstd
// frame, epoch deltas per stream across the whole run.
double flat_bytes_per_record(const Workload& w, size_t records, int level) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  std::vector<uint8_t> raw(max_record_bytes(w.n)), out(ZSTD_compressBound(raw.size()));
  StreamInfo s{w.epoch_scale, w.value_scale, 0};
  std::vector<int64_t> last(w.n_streams, 0);
  uint64_t total = 0;
  for (size_t i = 0; i < records; ++i) {
    size_t r = i % w.count;
    uint32_t sid = w.sids[r];
    int64_t tick;
    uint8_t* end = encode_record(raw.data(), sid, s, epoch_of(w, r, i / w.count), last[sid],
                                 w.indices(r), w.values(r), w.n, &tick, nullptr);
    last[sid] = tick;
    total += ZSTD_compressCCtx(c, out.data(), out.size(), raw.data(),
                               static_cast<size_t>(end - raw.data()), level);
  }
  ZSTD_freeCCtx(c);
  return static_cast<double>(total) / static_cast<double>(records);
}

// The single-folder layout on the caller's thread: encode + one zstd frame per
// record (no I/O), records/s.
void BM_FramePerRecord(benchmark::State& state) {
  const Workload& w = workload(static_cast<size_t>(state.range(0)), kSim);
  ZSTD_CCtx* c = ZSTD_createCCtx();
  std::vector<uint8_t> raw(max_record_bytes(w.n)), out(ZSTD_compressBound(raw.size()));
  StreamInfo s{w.epoch_scale, w.value_scale, 0};
  std::vector<int64_t> last(w.n_streams, 0);
  size_t r = 0, pass = 0;
  for (auto _ : state) {
    uint32_t sid = w.sids[r];
    int64_t tick;
    uint8_t* end = encode_record(raw.data(), sid, s, epoch_of(w, r, pass), last[sid],
                                 w.indices(r), w.values(r), w.n, &tick, nullptr);
    last[sid] = tick;
    benchmark::DoNotOptimize(ZSTD_compressCCtx(c, out.data(), out.size(), raw.data(),
                                               static_cast<size_t>(end - raw.data()), 1));
    if (++r == w.count) {
      r = 0;
      ++pass;
    }
  }
  ZSTD_freeCCtx(c);
  state.SetItemsProcessed(state.iterations());
  state.counters["bytes_per_record"] = flat_bytes_per_record(w, 20000, 1);
}
BENCHMARK(BM_FramePerRecord)->Arg(1)->Arg(16)->Arg(256);

// End to end: `threads` threads record the workload (thread t takes the
// records r with r % threads == t, so each stream has one writer thread) into
// a fresh logger, then close() (flush + fdatasync). Manual time covers all of
// it: the sustained rate including compression and I/O.
void BM_ToDisk(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(3));
  const Workload& w = workload(static_cast<size_t>(state.range(0)), kind);
  state.SetLabel(kind_name(kind));
  const int threads = static_cast<int>(state.range(1));
  const int level = static_cast<int>(state.range(2));
  const bool huffman = state.range(4) != 0;
  const size_t total = w.n >= 256 ? 400'000 : 4'000'000;
  std::string dir = temp_dir("todisk");
  Stats st;
  for (auto _ : state) {
    fs::remove_all(dir);
    Options o;
    o.zstd_level = level;
    o.compress_literals = huffman;
    o.ring_bytes = 32 << 20;
    auto t0 = std::chrono::steady_clock::now();
    {
      Logger lg(dir, o);
      auto ids = register_streams(lg, w);
      auto body = [&](int t) {
        size_t r = static_cast<size_t>(t), pass = 0;
        for (size_t i = static_cast<size_t>(t); i < total; i += static_cast<size_t>(threads)) {
          lg.record(ids[w.sids[r]], epoch_of(w, r, pass), w.indices(r), w.values(r), w.n);
          r += static_cast<size_t>(threads);
          if (r >= w.count) {
            r -= w.count;
            ++pass;
          }
        }
      };
      std::vector<std::thread> th;
      for (int t = 1; t < threads; ++t) th.emplace_back(body, t);
      body(0);
      for (auto& x : th) x.join();
      lg.close();
      st = lg.stats();
    }
    auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  fs::remove_all(dir);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * total));
  state.counters["bytes_per_record"] =
      static_cast<double>(st.file_bytes) / static_cast<double>(st.records);
  state.counters["raw_per_record"] =
      static_cast<double>(st.raw_bytes) / static_cast<double>(st.records);
  state.counters["frame_per_record_bytes"] = flat_bytes_per_record(w, 20000, level);
  state.counters["size_vs_frame_per_record"] =
      state.counters["bytes_per_record"] / state.counters["frame_per_record_bytes"];
  state.counters["full_events"] = static_cast<double>(st.full_events);
}
BENCHMARK(BM_ToDisk)
    ->ArgNames({"n", "threads", "level", "random", "huffman"})
    ->Args({1, 1, 1, kSim, 0})
    ->Args({16, 1, 1, kSim, 0})
    ->Args({16, 1, 1, kSim, 1})
    ->Args({16, 1, -1, kSim, 0})
    ->Args({16, 2, 1, kSim, 0})
    ->Args({256, 1, 1, kSim, 0})
    ->Args({256, 2, 1, kSim, 0})
    ->Args({16, 1, 1, kRandom, 0})
    ->Args({16, 1, 1, kRandom, 1})
    ->Args({16, 1, -1, kRandom, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

// Frames of a workload compressed at several zstd levels on one core:
// compression MB/s (what bounds the end-to-end rate) and bytes per record
// (what the size target is about), against one frame per record at level 1.
void BM_FrameCompress(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(2));
  const Workload& w = workload(static_cast<size_t>(state.range(0)), kind);
  const int level = static_cast<int>(state.range(1));
  state.SetLabel(kind_name(kind));
  // Encode the pool once into 256 KiB frames, as the logger does.
  std::vector<std::vector<uint8_t>> frames;
  std::vector<StreamInfo> si(w.n_streams, StreamInfo{w.epoch_scale, w.value_scale, 0});
  const size_t frame = 256 << 10;
  std::vector<uint8_t> sbuf(frame), vbuf(frame);
  FrameState st;
  st.new_frame();
  uint8_t* sp = sbuf.data();
  uint8_t* vp = vbuf.data();
  size_t in_frames = 0, pending = 0;
  auto seal = [&] {
    size_t sl = static_cast<size_t>(sp - sbuf.data()), vl = static_cast<size_t>(vp - vbuf.data());
    std::vector<uint8_t> f(kV2Prefix + sl + vl);
    le::store<uint32_t>(f.data(), static_cast<uint32_t>(sl));
    std::memcpy(f.data() + kV2Prefix, sbuf.data(), sl);
    std::memcpy(f.data() + kV2Prefix + sl, vbuf.data(), vl);
    frames.push_back(std::move(f));
    in_frames += pending;
    pending = 0;
    sp = sbuf.data();
    vp = vbuf.data();
    st.new_frame();
  };
  for (size_t r = 0; r < w.count; ++r) {
    if (frame - kV2Prefix - static_cast<size_t>(sp - sbuf.data()) -
            static_cast<size_t>(vp - vbuf.data()) <
        max_record_bytes(w.n))
      seal();
    ++pending;
    encode_record_v2(sp, vp, w.sids[r], si[w.sids[r]], w.epochs[r], st, w.indices(r),
                     w.values(r), w.n, nullptr);
  }
  ZSTD_CCtx* c = ZSTD_createCCtx();
  std::vector<uint8_t> out(ZSTD_compressBound(256 << 10));
  uint64_t raw = 0, comp = 0;
  for (auto _ : state) {
    raw = comp = 0;
    for (auto& fr : frames) {
      comp += ZSTD_compressCCtx(c, out.data(), out.size(), fr.data(), fr.size(), level) + kHeaderSize;
      raw += fr.size();
    }
  }
  ZSTD_freeCCtx(c);
  state.SetBytesProcessed(static_cast<int64_t>(raw * state.iterations()));
  state.counters["bytes_per_record"] = static_cast<double>(comp) / static_cast<double>(in_frames);
  state.counters["size_vs_frame_per_record"] =
      state.counters["bytes_per_record"] / flat_bytes_per_record(w, 20000, 1);
}
BENCHMARK(BM_FrameCompress)
    ->ArgNames({"n", "level", "random"})
    ->ArgsProduct({{16}, {-3, -1, 1, 3, 6}, {kSim, kRandom}})
    ->Unit(benchmark::kMillisecond);

// Decode a prepared log (2M records, n = 16) of each workload, written at
// zstd `level` with literals raw or Huffman-coded (the logger's defaults
// unless a benchmark says otherwise).
std::string decode_fixture(int kind, int level = Options{}.zstd_level,
                           bool huffman = Options{}.compress_literals) {
  static std::map<std::tuple<int, int, bool>, std::string> dirs;
  auto it = dirs.find({kind, level, huffman});
  if (it != dirs.end()) return it->second;
  std::string d =
      temp_dir(fmt::format("decode-{}-l{}-h{}", kind_name(kind), level, int(huffman)).c_str());
  const Workload& w = workload(16, kind);
  {
    Options o;
    o.zstd_level = level;
    o.compress_literals = huffman;
    Logger lg(d, o);
    auto ids = register_streams(lg, w);
    for (size_t i = 0; i < 2'000'000; ++i) {
      size_t r = i % w.count;
      lg.record(ids[w.sids[r]], epoch_of(w, r, i / w.count), w.indices(r), w.values(r), w.n);
    }
  }
  if (dirs.empty())
    std::atexit([] {
      for (auto& [k, p] : dirs) fs::remove_all(p);
    });
  dirs[{kind, level, huffman}] = d;
  return d;
}

void BM_Decode(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(1));
  std::string dir = decode_fixture(kind);
  state.SetLabel(kind_name(kind));
  DecodeOptions o;
  o.workers = static_cast<uint32_t>(state.range(0));
  uint64_t raw = 0, records = 0;
  for (auto _ : state) {
    Decoded d = decode_dir(dir, o);
    raw += d.raw_bytes;
    records += d.n_records();
  }
  state.SetBytesProcessed(static_cast<int64_t>(raw));
  state.SetItemsProcessed(static_cast<int64_t>(records));
}
BENCHMARK(BM_Decode)
    ->ArgNames({"workers", "random"})
    ->ArgsProduct({{1, 2}, {kSim, kRandom}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The frames of the prepared log, mapped, with reusable output columns.
struct WarmFrames {
  MappedFile file;
  std::vector<FrameRef> frames;
  StreamMeta meta;
  std::vector<uint32_t> ids, idx;
  std::vector<double> ep, val;
  std::vector<uint64_t> off;
  std::vector<uint8_t> raw;
  explicit WarmFrames(const std::string& dir)
      : file(dir + "/segments/00000.seg.zst"), meta(read_sidecar(sidecar_path(dir, 0), 0)) {
    std::vector<Problem> problems;
    scan_segment(file.data(), file.size(), dir + "/segments/00000.seg.zst", 0, frames, problems);
    // Data frames only: the closing frame is a header alone.
    std::erase_if(frames, [](const FrameRef& f) { return f.header.marker(); });
    size_t max_r = 0, max_v = 0, max_raw = 0;
    for (auto& f : frames) {
      max_r = std::max<size_t>(max_r, f.header.n_records);
      max_v = std::max<size_t>(max_v, f.header.n_values);
      max_raw = std::max<size_t>(max_raw, f.header.raw_len);
    }
    ids.resize(max_r);
    ep.resize(max_r);
    off.resize(max_r + 1);
    idx.resize(max_v);
    val.resize(max_v);
    raw.resize(max_raw);
  }
  // CRC check and decompression of frame f into raw; returns its bytes.
  size_t decompress(ZSTD_DCtx* dc, const FrameRef& f) {
    const uint8_t* payload = file.data() + f.offset + f.header.size();
    if (crc32c::compute(payload, f.header.compressed_len) != f.header.payload_crc) std::abort();
    size_t r = ZSTD_decompressDCtx(dc, raw.data(), raw.size(), payload, f.header.compressed_len);
    if (ZSTD_isError(r)) std::abort();
    return r;
  }
};

// Both workloads, each written at zstd level -1, at level 1 (the default:
// raw literals) and at level 1 with Huffman-coded literals (huffman:1).
void kinds_and_levels(benchmark::internal::Benchmark* b) {
  b->ArgNames({"random", "level", "huffman"});
  for (int kind : {kSim, kRandom}) {
    b->Args({kind, -1, 0});
    b->Args({kind, 1, 0});
    b->Args({kind, 1, 1});
  }
  b->Unit(benchmark::kMillisecond);
}

std::string decode_fixture_of(const benchmark::State& state) {
  return decode_fixture(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                        state.range(2) != 0);
}

// The decoder's per-core speed without allocating output: CRC check,
// decompress and parse every frame of the prepared log into reused columns
// (decode_dir adds the page faults of fresh output memory on top).
void BM_DecodeFramesWarm(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  WarmFrames wf(decode_fixture_of(state));
  state.SetLabel(kind_name(kind));
  const Workload& w = workload(16, kind);
  ScaleTable scales(w.n_streams, &wf.meta.info);
  ZSTD_DCtx* dc = ZSTD_createDCtx();
  uint64_t bytes = 0, records = 0;
  for (auto _ : state) {
    for (auto& f : wf.frames) {
      size_t r = wf.decompress(dc, f);
      FrameSink sink{wf.ids.data(), wf.ep.data(), wf.off.data() + 1, wf.idx.data(), wf.val.data(), 0,
                     f.header.n_records, f.header.n_values};
      records += decode_frame(f.header.payload_version(), wf.raw.data(), r, f.header.n_records, scales, sink).records;
      bytes += r;
    }
  }
  ZSTD_freeDCtx(dc);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetItemsProcessed(static_cast<int64_t>(records));
}
BENCHMARK(BM_DecodeFramesWarm)->Apply(kinds_and_levels);

// The parser alone: the frames decompressed once up front, then parsed into
// reused columns by the checked parser (AVX2 build without the bulk parser),
// the bulk parser's AVX2 build, or the default (the best bulk build this CPU
// runs: AVX-512 where it has it), in alternating runs of the same process so
// that the host's swings hit all alike.
void BM_ParseFrames(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const int parser = static_cast<int>(state.range(1));
  static constexpr const char* kParserNames[] = {"checked", "bulk (best build)", "bulk (AVX2 build)"};
  static constexpr DecoderChoice kParsers[] = {DecoderChoice::checked, DecoderChoice::best,
                                               DecoderChoice::avx2};
  WarmFrames wf(decode_fixture(kind, 1));
  state.SetLabel(fmt::format("{}, {} parser", kind_name(kind), kParserNames[parser]));
  const Workload& w = workload(16, kind);
  ScaleTable scales(w.n_streams, &wf.meta.info);
  ZSTD_DCtx* dc = ZSTD_createDCtx();
  std::vector<std::vector<uint8_t>> raws;
  for (auto& f : wf.frames) {
    size_t r = wf.decompress(dc, f);
    raws.emplace_back(wf.raw.begin(), wf.raw.begin() + static_cast<ptrdiff_t>(r));
  }
  ZSTD_freeDCtx(dc);
  use_decoder(kParsers[parser]);
  uint64_t bytes = 0, records = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < raws.size(); ++i) {
      const FrameRef& f = wf.frames[i];
      FrameSink sink{wf.ids.data(), wf.ep.data(), wf.off.data() + 1, wf.idx.data(), wf.val.data(), 0,
                     f.header.n_records, f.header.n_values};
      records += decode_frame(f.header.payload_version(), raws[i].data(), raws[i].size(), f.header.n_records,
                              scales, sink)
                     .records;
      bytes += raws[i].size();
    }
  }
  use_decoder(DecoderChoice::best);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetItemsProcessed(static_cast<int64_t>(records));
}
BENCHMARK(BM_ParseFrames)
    ->ArgNames({"random", "parser"})
    ->Args({kSim, 0})
    ->Args({kSim, 1})
    ->Args({kSim, 2})
    ->Args({kRandom, 0})
    ->Args({kRandom, 1})
    ->Args({kRandom, 2})
    ->Unit(benchmark::kMillisecond);

// The floor under BM_DecodeFramesWarm: the same CRC checks and zstd
// decompression (the system libzstd) with no parsing. Per-core decode speed
// can never exceed this.
void BM_DecompressFramesOnly(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  WarmFrames wf(decode_fixture_of(state));
  state.SetLabel(fmt::format("{}, zstd {}", kind_name(kind), ZSTD_versionString()));
  ZSTD_DCtx* dc = ZSTD_createDCtx();
  uint64_t bytes = 0, records = 0;
  for (auto _ : state) {
    for (auto& f : wf.frames) {
      bytes += wf.decompress(dc, f);
      records += f.header.n_records;
    }
  }
  ZSTD_freeDCtx(dc);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetItemsProcessed(static_cast<int64_t>(records));
}
BENCHMARK(BM_DecompressFramesOnly)->Apply(kinds_and_levels);

}  // namespace

BENCHMARK_MAIN();
