// Data logger benchmarks (docs/logger.md has the measured table).
//
//   BM_Encode/n            the work record() does on the caller's thread:
//                          validate + quantise + varint-encode into a frame
//                          buffer (no compression, no I/O)
//   BM_Record/n            record() itself through the Logger (slot lookup,
//                          spin lock, encode) with the writer on the other core
//                          and compression off the clock: per-call cost only
//   BM_ToDisk/n/threads    end to end: open, record, close (compressed, on
//                          disk, fdatasync'ed); records/s sustained
//   BM_SeedDesign/n        the seed's design: one zstd frame per record
//                          (compression included, no I/O), for comparison
//   BM_Decode/workers      decode_dir over a prepared log; bytes/s counts the
//                          decompressed frame bytes
// Counters: bytes_per_record for ours (file bytes incl. headers) and for the
// seed's one-frame-per-record design on the same records.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <thread>

#include <zstd.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "base/varint.hpp"
#include "logger/decoder.hpp"
#include "logger/encoder.hpp"
#include "logger/logger.hpp"

using namespace a2pack;
using namespace a2pack::logger;
namespace fs = std::filesystem;

namespace {

constexpr double kValueScale = 1e-4;  // values ~ N(0, 1): 3-byte varints
constexpr double kEpochScale = 1e-3;

// A pool of pre-generated records with n non-zeros each, cycled by the
// benchmarks so generation stays off the clock.
struct Workload {
  size_t n = 0;
  size_t count = 0;
  std::vector<uint32_t> idx;
  std::vector<double> val;
  std::vector<double> epochs;
};

const Workload& workload(size_t n) {
  static std::map<size_t, Workload> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  Workload w;
  w.n = n;
  w.count = 4096;
  std::mt19937_64 rng(n);
  std::normal_distribution<double> nd(0.0, 1.0);
  uint32_t universe = static_cast<uint32_t>(std::max<size_t>(1024, n * 16));
  for (size_t r = 0; r < w.count; ++r) {
    std::vector<uint32_t> pick;
    while (pick.size() < n) {
      uint32_t x = static_cast<uint32_t>(rng() % universe);
      if (std::find(pick.begin(), pick.end(), x) == pick.end()) pick.push_back(x);
    }
    std::sort(pick.begin(), pick.end());
    for (uint32_t x : pick) {
      w.idx.push_back(x);
      w.val.push_back(nd(rng));
    }
    w.epochs.push_back(static_cast<double>(r) * 0.01);
  }
  return cache.emplace(n, std::move(w)).first->second;
}

std::string temp_dir(const char* tag) {
  auto p = fs::temp_directory_path() / fmt::format("a2pack-bench-logger-{}-{}", tag, ::getpid());
  fs::remove_all(p);
  return p.string();
}

void BM_Encode(benchmark::State& state) {
  const Workload& w = workload(static_cast<size_t>(state.range(0)));
  StreamInfo s{kEpochScale, kValueScale, 0};
  std::vector<uint8_t> frame(256 << 10);
  DeltaState delta;
  delta.new_frame();
  size_t len = 0, r = 0;
  uint64_t raw = 0;
  const size_t need = max_record_bytes(w.n);
  for (auto _ : state) {
    if (frame.size() - len < need) {
      raw += len;
      len = 0;
      delta.new_frame();
    }
    int64_t tick;
    uint8_t* end = encode_record(frame.data() + len, 0, s, w.epochs[r] + 100.0 * raw, delta.base(0),
                                 w.idx.data() + r * w.n, w.val.data() + r * w.n, w.n, &tick,
                                 nullptr);
    delta.set(0, tick);
    len = static_cast<size_t>(end - frame.data());
    if (++r == w.count) r = 0;
  }
  raw += len;
  benchmark::DoNotOptimize(frame.data());
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(raw));
  state.counters["raw_bytes_per_record"] =
      static_cast<double>(raw) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_Encode)->Arg(1)->Arg(16)->Arg(256);

// record() on the caller thread only. The ring is large enough that the
// writer never makes record() wait during the timed loop; close happens off
// the clock.
void BM_Record(benchmark::State& state) {
  const Workload& w = workload(static_cast<size_t>(state.range(0)));
  std::string dir = temp_dir("record");
  Options o;
  o.ring_bytes = 1ull << 30;
  o.zstd_level = -1;
  {
    Logger lg(dir, o);
    uint32_t sid = lg.register_stream("{}", kEpochScale, kValueScale, 0);
    size_t r = 0;
    uint64_t k = 0;
    for (auto _ : state) {
      lg.record(sid, w.epochs[r] + static_cast<double>(k), w.idx.data() + r * w.n,
                w.val.data() + r * w.n, w.n);
      if (++r == w.count) {
        r = 0;
        k += 100;
      }
    }
    state.SetItemsProcessed(state.iterations());
    lg.close();  // after the timed loop: off the clock
    state.counters["full_events"] = static_cast<double>(lg.stats().full_events);
  }
  fs::remove_all(dir);
}
BENCHMARK(BM_Record)->Arg(1)->Arg(16)->Arg(256)->Iterations(4'000'000);

// Bytes of the same records in the seed's design: each record its own zstd
// frame, epoch deltas across the whole stream.
double seed_bytes_per_record(const Workload& w, size_t records, int level) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  std::vector<uint8_t> raw(max_record_bytes(w.n)), out(ZSTD_compressBound(raw.size()));
  StreamInfo s{kEpochScale, kValueScale, 0};
  int64_t last = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < records; ++i) {
    size_t r = i % w.count;
    int64_t tick;
    uint8_t* end = encode_record(raw.data(), 0, s, w.epochs[r] + static_cast<double>(i / w.count) * 100,
                                 last, w.idx.data() + r * w.n, w.val.data() + r * w.n, w.n, &tick,
                                 nullptr);
    last = tick;
    total += ZSTD_compressCCtx(c, out.data(), out.size(), raw.data(),
                               static_cast<size_t>(end - raw.data()), level);
  }
  ZSTD_freeCCtx(c);
  return static_cast<double>(total) / static_cast<double>(records);
}

void BM_SeedDesign(benchmark::State& state) {
  const Workload& w = workload(static_cast<size_t>(state.range(0)));
  ZSTD_CCtx* c = ZSTD_createCCtx();
  std::vector<uint8_t> raw(max_record_bytes(w.n)), out(ZSTD_compressBound(raw.size()));
  StreamInfo s{kEpochScale, kValueScale, 0};
  int64_t last = 0;
  size_t r = 0;
  for (auto _ : state) {
    int64_t tick;
    uint8_t* end = encode_record(raw.data(), 0, s, w.epochs[r], last, w.idx.data() + r * w.n,
                                 w.val.data() + r * w.n, w.n, &tick, nullptr);
    last = tick;
    benchmark::DoNotOptimize(ZSTD_compressCCtx(c, out.data(), out.size(), raw.data(),
                                               static_cast<size_t>(end - raw.data()), 1));
    if (++r == w.count) r = 0;
  }
  ZSTD_freeCCtx(c);
  state.SetItemsProcessed(state.iterations());
  state.counters["bytes_per_record"] = seed_bytes_per_record(w, 20000, 1);
}
BENCHMARK(BM_SeedDesign)->Arg(1)->Arg(16)->Arg(256);

// End to end: `threads` threads record `per_thread` records each into a fresh
// logger (one stream per thread), then close() (flush + fdatasync). Manual
// time covers all of it.
void BM_ToDisk(benchmark::State& state) {
  const Workload& w = workload(static_cast<size_t>(state.range(0)));
  const int threads = static_cast<int>(state.range(1));
  const int level = static_cast<int>(state.range(2));
  const size_t total = w.n >= 256 ? 400'000 : 4'000'000;
  const size_t per_thread = total / static_cast<size_t>(threads);
  std::string dir = temp_dir("todisk");
  Stats st;
  for (auto _ : state) {
    fs::remove_all(dir);
    Options o;
    o.zstd_level = level;
    o.ring_bytes = 32 << 20;
    auto t0 = std::chrono::steady_clock::now();
    {
      Logger lg(dir, o);
      std::vector<uint32_t> sids;
      for (int t = 0; t < threads; ++t) sids.push_back(lg.register_stream("{}", kEpochScale, kValueScale, 0));
      auto body = [&](int t) {
        size_t r = 0;
        uint64_t k = 0;
        for (size_t i = 0; i < per_thread; ++i) {
          lg.record(sids[t], w.epochs[r] + static_cast<double>(k), w.idx.data() + r * w.n,
                    w.val.data() + r * w.n, w.n);
          if (++r == w.count) {
            r = 0;
            k += 100;
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
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * per_thread * threads));
  state.counters["bytes_per_record"] =
      static_cast<double>(st.file_bytes) / static_cast<double>(st.records);
  state.counters["raw_per_record"] =
      static_cast<double>(st.raw_bytes) / static_cast<double>(st.records);
  state.counters["seed_bytes_per_record"] = seed_bytes_per_record(w, 20000, level);
  state.counters["size_vs_seed"] =
      state.counters["bytes_per_record"] / state.counters["seed_bytes_per_record"];
  state.counters["full_events"] = static_cast<double>(st.full_events);
}
BENCHMARK(BM_ToDisk)
    ->ArgNames({"n", "threads", "level"})
    ->Args({1, 1, 1})
    ->Args({16, 1, 1})
    ->Args({16, 2, 1})
    ->Args({16, 1, -1})
    ->Args({256, 1, 1})
    ->Args({256, 2, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

// Decode a prepared log (2M records, n = 16).
const std::string& decode_fixture() {
  static std::string dir = [] {
    std::string d = temp_dir("decode");
    const Workload& w = workload(16);
    Logger lg(d, Options{});
    uint32_t sid = lg.register_stream("{}", kEpochScale, kValueScale, 0);
    for (size_t i = 0; i < 2'000'000; ++i) {
      size_t r = i % w.count;
      lg.record(sid, w.epochs[r] + static_cast<double>(i / w.count) * 100, w.idx.data() + r * w.n,
                w.val.data() + r * w.n, w.n);
    }
    lg.close();
    std::atexit([] { fs::remove_all(decode_fixture()); });
    return d;
  }();
  return dir;
}

void BM_Decode(benchmark::State& state) {
  const std::string& dir = decode_fixture();
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
BENCHMARK(BM_Decode)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
