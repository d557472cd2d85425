// Packfile benchmarks (docs/pack.md has the measured table):
//  - open + validate of a 100 000-entry pack (open checks all CRCs of the
//    header, index and footer and every entry's bounds; validate quick adds
//    16 sampled entries);
//  - decode_batch of 256 random runs at 1 and 2 workers, against the
//    baseline run::decode_batch of the same payloads already in memory;
//  - full JSONL export in both modes at 1 and 2 workers;
//  - the same runs stored, zstd- and lz4-compressed: decode speed (MB/s of
//    run-file bytes decoded) and size, each codec alone and all interleaved
//    in one benchmark that reports them as ratios.
// Runs are copies of the upstream fixture (a real v2 run with branches)
// when it is present, synthetic runs of the same shape otherwise.
#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "pack/jsonl.hpp"
#include "pack/reader.hpp"
#include "pack/writer.hpp"
#include "run/batch.hpp"
#include "run/codec.hpp"

namespace fs = std::filesystem;
using namespace a2pack;

namespace {

std::string fixture_path() {
  const char* env = std::getenv("A2PACK_FIXTURE");
  return env && *env ? env : A2PACK_FIXTURE_DEFAULT;
}

// A run shaped like real expectimax output: ~1000 steps, all with branches.
std::string synthetic_run(uint64_t seed, size_t n) {
  run::Run r;
  std::mt19937_64 rng(seed);
  r.meta.steps = static_cast<uint32_t>(n);
  r.meta.highest_tile = 2048;
  r.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r.boards[i] = (rng() >> 8) | (1ull << 56);
    r.moves[i] = static_cast<uint8_t>(rng() % 4);
    r.present[i] = 1;
    r.legal[i] = 0xF;
    for (int k = 0; k < 4; ++k) r.values[4 * i + k] = static_cast<float>(rng() % 1000) / 1000.0f;
  }
  return run::encode_v2(r);
}

struct Data {
  std::string dir;
  std::string big;     // 100 000 small entries
  std::string runs;    // 1024 realistic runs
  std::vector<std::string> payloads;
  uint64_t payload_bytes = 0;

  Data() {
    // Files live in memory (/dev/shm) when possible so the figures are the
    // library's, not the disk's; A2PACK_BENCH_DIR picks another place.
    const char* env = std::getenv("A2PACK_BENCH_DIR");
    std::string base = env && *env ? env : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/a2pack-bench-pack-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed in " + base);
    dir = tmpl;
    std::string fx;
    if (fs::exists(fixture_path())) {
      auto b = read_file(fixture_path());
      fx.assign(b.begin(), b.end());
    }
    for (int i = 0; i < 1024; ++i) {
      payloads.push_back(fx.empty() ? synthetic_run(i, 960) : fx);
      payload_bytes += payloads.back().size();
    }
    runs = dir + "/runs.a2pack";
    {
      pack::WriterOptions o;
      o.expected_count = payloads.size();
      pack::Writer w(runs, o);
      for (auto& p : payloads) w.add(reinterpret_cast<const uint8_t*>(p.data()), p.size());
      w.finish();
    }
    big = dir + "/big.a2pack";
    {
      pack::WriterOptions o;
      o.expected_count = 100000;
      o.align = 64;  // open reads only the index; keep the file small
      pack::Writer w(big, o);
      std::string small = synthetic_run(7, 8);
      pack::Prepared p = pack::prepare(reinterpret_cast<const uint8_t*>(small.data()), small.size(), o);
      for (int i = 0; i < 100000; ++i) w.append(p);
      w.finish();
    }
  }
  ~Data() { fs::remove_all(dir); }
};

Data& data() {
  static Data d;
  return d;
}

std::vector<uint64_t> random_indices(size_t n, uint64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> idx(n);
  for (auto& i : idx) i = rng() % count;
  return idx;
}

void BM_OpenValidate100k(benchmark::State& state) {
  Data& d = data();
  for (auto _ : state) {
    pack::Reader r(d.big);
    r.validate(false, 1, {});
    benchmark::DoNotOptimize(r.size());
  }
  state.counters["entries"] = 100000;
}
BENCHMARK(BM_OpenValidate100k)->Unit(benchmark::kMillisecond);

// Payload MB/s and M steps/s, the two rates every decode benchmark reports.
void set_decode_counters(benchmark::State& state, uint64_t bytes, uint64_t steps) {
  state.counters["payload_MB/s"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.counters["Msteps/s"] =
      benchmark::Counter(static_cast<double>(steps) / 1e6, benchmark::Counter::kIsRate);
}

void BM_PackDecodeBatch256(benchmark::State& state) {
  Data& d = data();
  pack::Reader r(d.runs);
  const uint32_t workers = static_cast<uint32_t>(state.range(0));
  const bool verify = state.range(1) != 0;
  uint64_t seed = 1, bytes = 0, steps = 0;
  for (auto _ : state) {
    auto idx = random_indices(256, r.size(), seed++);
    run::Batch b = r.decode_batch(idx.data(), idx.size(), workers, verify);
    for (uint64_t i : idx) bytes += r.entry(i).length;
    steps += b.n_steps();
    benchmark::DoNotOptimize(b.boards.data());
  }
  set_decode_counters(state, bytes, steps);
}
// CPU time is the whole process's (all worker threads): payload bytes / CPU
// time is the per-core rate even on a loaded machine.
BENCHMARK(BM_PackDecodeBatch256)
    ->ArgNames({"workers", "crc"})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({1, 0})
    ->Args({2, 0})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// Baseline: the run layer's batch decode of the same payloads in memory (no
// pack, no CRC check).
void BM_BaselineRunDecodeBatch256(benchmark::State& state) {
  Data& d = data();
  const uint32_t workers = static_cast<uint32_t>(state.range(0));
  uint64_t seed = 1, bytes = 0, steps = 0;
  for (auto _ : state) {
    auto idx = random_indices(256, d.payloads.size(), seed++);
    std::vector<run::Payload> p;
    for (uint64_t i : idx) {
      p.push_back({reinterpret_cast<const uint8_t*>(d.payloads[i].data()), d.payloads[i].size()});
      bytes += d.payloads[i].size();
    }
    run::Batch b = run::decode_batch(p.data(), p.size(), workers);
    steps += b.n_steps();
    benchmark::DoNotOptimize(b.boards.data());
  }
  set_decode_counters(state, bytes, steps);
}
BENCHMARK(BM_BaselineRunDecodeBatch256)
    ->ArgName("workers")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

void BM_ToJsonl(benchmark::State& state) {
  Data& d = data();
  pack::Reader r(d.runs);
  const auto mode = static_cast<pack::JsonlMode>(state.range(0));
  const uint32_t workers = static_cast<uint32_t>(state.range(1));
  const std::string out = d.dir + "/out.jsonl";
  uint64_t bytes = 0;
  for (auto _ : state) bytes += pack::export_jsonl(r, out, mode, workers, true, {}).bytes;
  state.counters["json_MB/s"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.SetLabel(mode == pack::JsonlMode::runs ? "runs" : "steps");
}
BENCHMARK(BM_ToJsonl)
    ->Args({0, 1})
    ->Args({0, 2})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// Serialisation alone, one thread, no file: decode + JSON of every run into
// memory. This is the per-core JSON rate; BM_ToJsonl adds the file writes,
// the fsync of the atomic commit and the parallel shards.
void BM_JsonSerializeOneCore(benchmark::State& state) {
  Data& d = data();
  pack::Reader r(d.runs);
  const auto mode = static_cast<pack::JsonlMode>(state.range(0));
  uint64_t bytes = 0;
  pack::JsonBuf buf;
  run::Run run;
  for (auto _ : state) {
    for (uint64_t i = 0; i < r.size(); ++i) {
      buf.clear();
      uint32_t crc = 0;
      pack::EntryBytes b = r.payload_and_crc(i, true, crc);
      pack::decode_reusing(run, b.data, b.size);
      if (mode == pack::JsonlMode::runs)
        pack::append_run_json(buf, i, run);
      else
        pack::append_steps_json(buf, i, crc, run);
      bytes += buf.size();
    }
  }
  state.counters["json_MB/s"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.SetLabel(mode == pack::JsonlMode::runs ? "runs" : "steps");
}
BENCHMARK(BM_JsonSerializeOneCore)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------- codecs
// The 1024 runs of Data packed four ways: stored, zstd (level 3, the
// default), lz4 (level 0, the default: LZ4's fast mode) and lz4 HC (level 9).
// Each entry is compressed on its own, so copies of one run compress alike.
struct Codec {
  const char* name;
  pack::Compression compression;
  int level;
  std::string path;
  uint64_t stored_bytes = 0;  // payload bytes in the pack
  uint64_t file_bytes = 0;
};

struct CodecData {
  std::vector<Codec> codecs = {{"stored", pack::Compression::none, 0, {}},
                               {"zstd", pack::Compression::zstd, 3, {}},
                               {"lz4", pack::Compression::lz4, 0, {}},
                               {"lz4hc9", pack::Compression::lz4, 9, {}}};
  CodecData() {
    Data& d = data();
    for (Codec& c : codecs) {
      c.path = d.dir + "/runs-" + c.name + ".a2pack";
      pack::WriterOptions o;
      o.expected_count = d.payloads.size();
      o.compression = c.compression;
      o.zstd_level = c.level;
      o.lz4_level = c.level;
      pack::Writer w(c.path, o);
      for (auto& p : d.payloads) w.add(reinterpret_cast<const uint8_t*>(p.data()), p.size());
      pack::BuildSummary s = w.finish();
      c.stored_bytes = s.stored_bytes;
      c.file_bytes = s.file_bytes;
    }
  }
};

CodecData& codec_data() {
  static CodecData d;
  return d;
}

// Run-file bytes of entries idx (what decoding them yields).
uint64_t run_bytes(const pack::Reader& r, const std::vector<uint64_t>& idx) {
  uint64_t n = 0;
  for (uint64_t i : idx) n += r.entry(i).flags == pack::kEntryStored ? r.entry(i).length : r.entry(i).reserved;
  return n;
}

void set_size_counters(benchmark::State& state, const Codec& c) {
  const Codec& stored = codec_data().codecs[0];
  state.counters["stored_MB"] = static_cast<double>(c.stored_bytes) / 1e6;
  state.counters["size_vs_stored"] = static_cast<double>(c.stored_bytes) / static_cast<double>(stored.stored_bytes);
  state.SetLabel(c.name);
}

// decode_batch of 256 random entries on one worker, entry CRCs checked:
// run_MB/s is run-file bytes decoded (after decompression) per second.
void BM_PackCodecDecodeBatch256(benchmark::State& state) {
  const Codec& c = codec_data().codecs[static_cast<size_t>(state.range(0))];
  pack::Reader r(c.path);
  uint64_t seed = 1, bytes = 0;
  for (auto _ : state) {
    auto idx = random_indices(256, r.size(), seed++);
    run::Batch b = r.decode_batch(idx.data(), idx.size(), 1, true);
    bytes += run_bytes(r, idx);
    benchmark::DoNotOptimize(b.boards.data());
  }
  state.counters["run_MB/s"] = benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsRate);
  set_size_counters(state, c);
}
BENCHMARK(BM_PackCodecDecodeBatch256)
    ->ArgName("codec")
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// Every entry's run-file bytes out (CRC checked, decompressed), what
// `a2pack extract` does per entry: the codec's cost without the run decoder.
void BM_PackCodecReadAll(benchmark::State& state) {
  const Codec& c = codec_data().codecs[static_cast<size_t>(state.range(0))];
  pack::Reader r(c.path);
  uint64_t bytes = 0;
  for (auto _ : state) {
    for (uint64_t i = 0; i < r.size(); ++i) {
      pack::EntryBytes b = r.payload(i, true);
      bytes += b.size;
      benchmark::DoNotOptimize(b.data);
    }
  }
  state.counters["run_MB/s"] = benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsRate);
  set_size_counters(state, c);
}
BENCHMARK(BM_PackCodecReadAll)
    ->ArgName("codec")
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

double thread_cpu_seconds() {
  timespec t;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The codecs side by side in one run: each iteration takes the same 256
// random entries from every pack in turn - decoded to columns (decode_batch,
// mode 0) or read out as run-file bytes (payload(), as extract, mode 1) - on
// one worker, this thread, CRCs checked, each timed by this thread's CPU
// clock, so a busy machine slows all of them alike. Counters: each codec's
// run MB per CPU second, and the ratios - lz4 against zstd and stored for
// speed, every codec's stored bytes against the stored pack's for size.
void BM_PackCodecCompare(benchmark::State& state) {
  CodecData& cd = codec_data();
  const bool decode = state.range(0) == 0;
  const size_t k = cd.codecs.size();
  std::vector<std::unique_ptr<pack::Reader>> readers;
  for (const Codec& c : cd.codecs) readers.push_back(std::make_unique<pack::Reader>(c.path));
  std::vector<double> cpu(k, 0.0);
  uint64_t seed = 1, bytes = 0;
  for (auto _ : state) {
    auto idx = random_indices(256, readers[0]->size(), seed++);
    bytes += run_bytes(*readers[0], idx);
    for (size_t j = 0; j < k; ++j) {
      double t0 = thread_cpu_seconds();
      if (decode) {
        run::Batch b = readers[j]->decode_batch(idx.data(), idx.size(), 1, true);
        benchmark::DoNotOptimize(b.boards.data());
      } else {
        for (uint64_t i : idx) {
          pack::EntryBytes b = readers[j]->payload(i, true);
          benchmark::DoNotOptimize(b.data);
        }
      }
      cpu[j] += thread_cpu_seconds() - t0;
    }
  }
  std::vector<double> rate(k);
  for (size_t j = 0; j < k; ++j) {
    rate[j] = static_cast<double>(bytes) / 1e6 / cpu[j];
    state.counters[std::string(cd.codecs[j].name) + "_MB/s"] = rate[j];
    state.counters[std::string(cd.codecs[j].name) + "_size"] =
        static_cast<double>(cd.codecs[j].stored_bytes) / static_cast<double>(cd.codecs[0].stored_bytes);
  }
  state.counters["lz4_vs_zstd_speed"] = rate[2] / rate[1];
  state.counters["lz4_vs_stored_speed"] = rate[2] / rate[0];
  state.counters["zstd_vs_stored_speed"] = rate[1] / rate[0];
  state.counters["lz4_vs_zstd_size"] =
      static_cast<double>(cd.codecs[2].stored_bytes) / static_cast<double>(cd.codecs[1].stored_bytes);
  state.SetLabel(decode ? "decode_batch" : "read");
}
BENCHMARK(BM_PackCodecCompare)->ArgName("mode")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MinTime(3.0);

}  // namespace

BENCHMARK_MAIN();
