// Step dataset benchmarks (docs/dataset.md, Performance), on a synthetic dataset of
// $A2PACK_BENCH_ROWS rows (default 10 M = 320 MB) built once per process:
//  - gathering 4 096 random rows: a2pack's gather (prefetching, 1 and 2
//    workers) and column gather, against the baseline plain single-threaded
//    copy loop over the same array (the memory-latency floor);
//  - loading: Dataset::open into RAM (with and without the CRC check) and
//    mapped, against the baseline plain sequential read() of steps.npy;
//  - building (rows/s), an SQL filter, and a sampler epoch.
// The ratios against the baselines are reported as counters.
//
// `bench_dataset --make-dataset=DIR [--rows=N]` only writes the dataset (for
// bench/dataset_compare.py) and exits. `bench_dataset --probe=DIR
// [--threads=T]` measures, on DIR's rows loaded as a feed loads them, what
// the memory allows for random rows (the memory-parallelism probe below)
// and a2pack's column gather, with 1 to T threads, prints one JSON line
// (for bench/shuffle_compare.py) and exits.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/file_io.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/gather.hpp"
#include "dataset/sampler.hpp"
#include "dataset/source.hpp"
#include "run/codec.hpp"

namespace fs = std::filesystem;
using namespace a2pack;
using namespace a2pack::dataset;

namespace {

constexpr size_t kBatch = 4096;
constexpr size_t kStepsPerRun = 1000;

// Runs generated in memory: random boards with branch values, encoded as v2
// payloads on demand (so a 1 B-row build would not hold them all).
class SyntheticSource final : public RunSource {
 public:
  explicit SyntheticSource(uint64_t rows) : rows_(rows) {}
  size_t count() const override { return static_cast<size_t>((rows_ + kStepsPerRun - 1) / kStepsPerRun); }
  PayloadView payload(size_t i, std::vector<uint8_t>& scratch) const override {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kStepsPerRun, rows_ - i * kStepsPerRun));
    std::mt19937_64 rng(i);
    run::Run r;
    r.meta.steps = static_cast<uint32_t>(n);
    r.meta.max_score = rng() % 100000;
    r.meta.highest_tile = 1u << (8 + rng() % 6);
    r.meta.engine = i % 2 ? "synthetic-a" : "synthetic-b";
    r.resize(n);
    for (size_t s = 0; s < n; ++s) {
      r.boards[s] = rng();
      r.moves[s] = static_cast<uint8_t>(rng() % 4);
      r.present[s] = 1;
      r.legal[s] = 0xF;
      for (int k = 0; k < 4; ++k) r.values[4 * s + k] = static_cast<float>(rng() % 1000) / 1000.0f;
    }
    std::string b = run::encode_v2(r);
    scratch.assign(b.begin(), b.end());
    return {scratch.data(), scratch.size()};
  }
  std::string label(size_t i) const override { return "synthetic run " + std::to_string(i); }
  std::string input() const override { return "synthetic"; }
  std::string kind() const override { return "synthetic"; }

 private:
  uint64_t rows_;
};

uint64_t bench_rows() {
  const char* env = std::getenv("A2PACK_BENCH_ROWS");
  return env && *env ? std::strtoull(env, nullptr, 10) : 10'000'000;
}

struct Data {
  std::string tmp, dir;
  uint64_t rows = 0;
  double build_seconds = 0;
  std::unique_ptr<Dataset> ds;
  std::vector<std::vector<int64_t>> batches;  // pre-drawn random index batches

  Data() {
    rows = bench_rows();
    char tmpl[] = "/tmp/a2pack-bench-ds-XXXXXX";
    tmp = ::mkdtemp(tmpl);
    dir = tmp + "/ds";
    SyntheticSource src(rows);
    BuildOptions o;
    auto t0 = std::chrono::steady_clock::now();
    build(src, dir, o);
    build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    OpenOptions oo;
    ds = Dataset::open(dir, oo);
    std::mt19937_64 rng(7);
    for (int b = 0; b < 1024; ++b) {  // 128 MB of rows touched per cycle: no L3 reuse
      std::vector<int64_t> idx(kBatch);
      for (auto& x : idx) x = static_cast<int64_t>(rng() % rows);
      batches.push_back(std::move(idx));
    }
  }
  ~Data() {
    std::error_code ec;
    fs::remove_all(tmp, ec);
  }
};

Data& data() {
  static Data d;
  return d;
}

// The baseline: a plain copy loop, one row at a time, no prefetch.
__attribute__((noinline)) void plain_gather(const uint8_t* base, const int64_t* idx, size_t n,
                                            uint8_t* out) {
  for (size_t i = 0; i < n; ++i)
    std::memcpy(out + 32 * i, base + 32 * static_cast<size_t>(idx[i]), 32);
}

// Seconds per batch of the plain loop over `base`, measured now (so a ratio
// compares runs taken under the same machine load).
double plain_seconds_per_batch(const uint8_t* base, size_t reps = 400) {
  auto& d = data();
  std::vector<uint8_t> out(32 * kBatch);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t r = 0; r < reps; ++r)
    plain_gather(base, d.batches[r % d.batches.size()].data(), kBatch, out.data());
  benchmark::DoNotOptimize(out.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(reps);
}

void BM_Gather_PlainLoop(benchmark::State& st) {
  auto& d = data();
  std::vector<uint8_t> out(32 * kBatch);
  size_t b = 0;
  for (auto _ : st) {
    plain_gather(d.ds->data(), d.batches[b++ % d.batches.size()].data(), kBatch, out.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * kBatch));
}

// The same loop over a copy of the rows in ordinary 4 KiB pages (what an
// np.load'ed array is in): shows what the huge pages buy.
void BM_Gather_PlainLoop_SmallPages(benchmark::State& st) {
  auto& d = data();
  static std::vector<uint8_t> copy(d.ds->data(), d.ds->data() + d.rows * 32);
  std::vector<uint8_t> out(32 * kBatch);
  size_t b = 0;
  for (auto _ : st) {
    plain_gather(copy.data(), d.batches[b++ % d.batches.size()].data(), kBatch, out.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * kBatch));
}

void BM_Gather_A2pack(benchmark::State& st) {
  auto& d = data();
  std::vector<uint8_t> out(32 * kBatch);
  uint32_t workers = static_cast<uint32_t>(st.range(0));
  size_t b = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    d.ds->gather(d.batches[b++ % d.batches.size()].data(), kBatch, out.data(), workers);
    benchmark::ClobberMemory();
  }
  double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
               static_cast<double>(st.iterations());
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * kBatch));
  st.counters["x_vs_plain"] = plain_seconds_per_batch(d.ds->data()) / per;
}

// Room for one batch of the feed's four columns, and the ColumnsOut over it.
struct FeedColumns {
  std::vector<uint8_t> exps = std::vector<uint8_t>(16 * kBatch);
  std::vector<uint8_t> moves = std::vector<uint8_t>(kBatch);
  std::vector<uint8_t> legal = std::vector<uint8_t>(4 * kBatch);
  std::vector<float> ev = std::vector<float>(4 * kBatch);
  ColumnsOut out() {
    ColumnsOut c;
    c.exponents = exps.data();
    c.moves = moves.data();
    c.legal = legal.data();
    c.ev_values = ev.data();
    return c;
  }
};

void BM_GatherColumns_A2pack(benchmark::State& st) {
  auto& d = data();
  FeedColumns cols;
  const ColumnsOut c = cols.out();
  uint32_t workers = static_cast<uint32_t>(st.range(0));
  size_t b = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    d.ds->gather_columns(d.batches[b++ % d.batches.size()].data(), kBatch, c, workers);
    benchmark::ClobberMemory();
  }
  double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
               static_cast<double>(st.iterations());
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * kBatch));
  st.counters["x_vs_plain_rows"] = plain_seconds_per_batch(d.ds->data()) / per;
}

// Plain loop, a2pack with 1 and 2 workers, and the column gather, timed
// round-robin on fresh batches: on a shared machine the three see the same
// load, and the 10th percentile approximates an undisturbed run. Counters:
// p10 and median microseconds per batch, and the p10 ratios to the plain loop.
void BM_GatherInterleaved(benchmark::State& st) {
  auto& d = data();
  std::vector<uint8_t> out(32 * kBatch);
  FeedColumns cols;
  const ColumnsOut c = cols.out();
  const char* names[] = {"plain", "w1", "w2", "cols_w1", "cols_w2"};
  constexpr int kMethods = 5;
  std::vector<double> t[kMethods];
  size_t k = 0;
  for (auto _ : st) {
    for (int round = 0; round < 500; ++round)
      for (int m = 0; m < kMethods; ++m) {
        const int64_t* idx = d.batches[k++ % d.batches.size()].data();
        auto t0 = std::chrono::steady_clock::now();
        switch (m) {
          case 0: plain_gather(d.ds->data(), idx, kBatch, out.data()); break;
          case 1: d.ds->gather(idx, kBatch, out.data(), 1); break;
          case 2: d.ds->gather(idx, kBatch, out.data(), 2); break;
          case 3: d.ds->gather_columns(idx, kBatch, c, 1); break;
          case 4: d.ds->gather_columns(idx, kBatch, c, 2); break;
        }
        benchmark::ClobberMemory();
        t[m].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e6);
      }
  }
  double p10[kMethods];
  for (int m = 0; m < kMethods; ++m) {
    std::sort(t[m].begin(), t[m].end());
    p10[m] = t[m][t[m].size() / 10];
    st.counters[std::string(names[m]) + "_p10_us"] = p10[m];
    st.counters[std::string(names[m]) + "_med_us"] = t[m][t[m].size() / 2];
  }
  for (int m = 1; m < kMethods; ++m) st.counters[std::string(names[m]) + "_x_plain"] = p10[0] / p10[m];
}

// ---------------------------------------------------------------- loading
// The baseline: one thread, sequential read() of the whole file into fresh
// memory (as np.load allocates it: page faults included).
void plain_read(const std::string& path, uint64_t size) {
  std::unique_ptr<uint8_t[]> buf(new uint8_t[size]);
  int fd = ::open(path.c_str(), O_RDONLY);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, buf.get() + done, std::min<uint64_t>(size - done, 8u << 20));
    if (n <= 0) break;
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  benchmark::DoNotOptimize(buf.get());
}

void BM_Load_PlainRead(benchmark::State& st) {
  auto& d = data();
  std::string path = d.dir + "/steps.npy";
  uint64_t size = fs::file_size(path);
  for (auto _ : st) plain_read(path, size);
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * size));
}

void BM_Load_A2pack(benchmark::State& st) {
  auto& d = data();
  OpenOptions o;
  o.mmap = st.range(0) == 2;
  o.verify_crc = st.range(0) != 0;
  uint64_t bytes = d.rows * 32;
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    auto ds = Dataset::open(d.dir, o);
    if (o.mmap) {  // a mapping costs nothing until touched: touch every page
      uint64_t sum = 0;
      for (uint64_t off = 0; off < bytes; off += 4096) sum += ds->data()[off];
      benchmark::DoNotOptimize(sum);
    }
  }
  double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
               static_cast<double>(st.iterations());
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * bytes));
  std::string path = d.dir + "/steps.npy";
  uint64_t size = fs::file_size(path);
  auto t1 = std::chrono::steady_clock::now();
  for (int r = 0; r < 3; ++r) plain_read(path, size);
  double plain = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() / 3;
  st.counters["x_vs_plain_read"] = plain / per;
  st.SetLabel(o.mmap ? "mmap+crc" : o.verify_crc ? "ram+crc" : "ram");
}

// ---------------------------------------------------------------- other
void BM_Build(benchmark::State& st) {
  auto& d = data();
  for (auto _ : st) st.SetIterationTime(d.build_seconds);
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * d.rows));
  st.SetLabel("rows/s of the synthetic build (in-memory payloads)");
}

void BM_SelectSql(benchmark::State& st) {
  auto& d = data();
  SqlParam lo, hi;
  lo.type = hi.type = SqlParam::integer;
  lo.i = 20000;
  hi.i = 40000;
  uint64_t n = 0;
  for (auto _ : st) {
    auto r = d.ds->select("max_score BETWEEN ? AND ?", {lo, hi});
    n = total_rows(r);
    auto v = expand(r);
    benchmark::DoNotOptimize(v.data());
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * n));
}

void BM_SamplerEpoch(benchmark::State& st) {
  auto& d = data();
  Sampler s({}, true, d.rows, 1, kBatch, false);
  uint64_t e = 0;
  for (auto _ : st) s.set_epoch(++e);
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * d.rows));
}

// One batch's indices (4 096 positions of epoch 1's order, batch by batch
// through the epoch) at n = 4 M and 100 M rows: the stored permutation's
// copy against the index shuffle's computation. No dataset: the order alone.
void BM_SamplerFill(benchmark::State& st) {
  const uint64_t n = static_cast<uint64_t>(st.range(0));
  const auto kind = st.range(1) ? Shuffle::kIndex : Shuffle::kStored;
  Sampler s({}, true, n, 1, kBatch, false, true, kind);
  s.set_epoch(1);
  std::vector<int64_t> out(kBatch);
  size_t b = 0;
  const size_t count = s.batch_count();
  for (auto _ : st) {
    s.fill_batch(b, out.data());
    benchmark::DoNotOptimize(out.data());
    b = (b + 7919) % count;  // batches far apart, as threads and epochs take them
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * kBatch));
  st.SetLabel(kind == Shuffle::kIndex ? "index shuffle" : "stored permutation");
}

// ---------------------------------------------------------------- the memory's limit
// The memory-parallelism probe: how many random rows a second the memory
// delivers to `threads` cores when nothing but the loads themselves stands
// in the way. Each thread walks its own pre-drawn random rows and reads one
// word of each, the loads independent of each other (a sum), with a
// software prefetch (into L2, as the gather's) `ahead` rows in front, so
// that as many misses are in flight as the core's buffers take; the best
// of a few distances is the limit. Every run draws rows of its own, so that
// none finds the lines an earlier one left in the cache. A gather moves a
// row's 32 bytes into its columns besides: this bounds it from above.
double probe_rows_per_s(const uint8_t* base, uint64_t rows, unsigned threads, size_t ahead,
                        uint64_t seed) {
  constexpr size_t kRowsPerThread = size_t{1} << 22;  // 4 M loads: ~0.1 s a thread
  std::vector<std::vector<uint32_t>> idx(threads);
  for (unsigned t = 0; t < threads; ++t) {
    std::mt19937_64 rng(seed * 64 + t);
    idx[t].resize(kRowsPerThread + ahead);
    for (auto& x : idx[t]) x = static_cast<uint32_t>(rng() % rows);
  }
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::vector<uint64_t> sums(threads);
  std::vector<double> secs(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const uint32_t* ix = idx[t].data();
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      auto t0 = std::chrono::steady_clock::now();
      uint64_t sum = 0;
      for (size_t i = 0; i < kRowsPerThread; ++i) {
        if (ahead) __builtin_prefetch(base + size_t{ix[i + ahead]} * 32, 0, 2);
        uint64_t w;
        std::memcpy(&w, base + size_t{ix[i]} * 32, sizeof w);
        sum += w;
      }
      secs[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      sums[t] = sum;
    });
  while (ready.load() < threads) std::this_thread::yield();
  go.store(true);
  for (auto& th : pool) th.join();
  benchmark::DoNotOptimize(sums.data());
  return static_cast<double>(kRowsPerThread) * threads / *std::max_element(secs.begin(), secs.end());
}

struct Probe {
  double rows_per_s = 0;
  size_t ahead = 0;
};

Probe memory_limit(const uint8_t* base, uint64_t rows, unsigned threads) {
  Probe best;
  uint64_t seed = 1;
  for (size_t ahead : {size_t{0}, size_t{16}, size_t{32}, size_t{64}, size_t{128}}) {
    double r = 0;
    for (int rep = 0; rep < 3; ++rep)
      r = std::max(r, probe_rows_per_s(base, rows, threads, ahead, seed++));
    if (r > best.rows_per_s) best = {r, ahead};
  }
  return best;
}

// a2pack's column gather of 4 096-row random batches (the feed's columns),
// one batch per thread at a time, as the feed's producers gather; each
// batch drawn afresh (no row's line left in the cache by an earlier one).
double gather_rows_per_s(const Dataset& ds, unsigned threads) {
  constexpr int kBatches = 400;
  static uint64_t runs = 0;
  const uint64_t run = ++runs;
  std::vector<double> secs(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(run * 1000003 + t);
      std::vector<std::vector<int64_t>> batches(kBatches, std::vector<int64_t>(kBatch));
      for (auto& b : batches)
        for (auto& x : b) x = static_cast<int64_t>(rng() % ds.rows());
      FeedColumns cols;
      const ColumnsOut c = cols.out();
      auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < kBatches; ++k) ds.gather_columns(batches[k].data(), kBatch, c, 1);
      secs[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  for (auto& th : pool) th.join();
  return double{kBatches} * kBatch * threads / *std::max_element(secs.begin(), secs.end());
}

int probe_main(const std::string& dir, unsigned max_threads) {
  OpenOptions o;
  o.verify_crc = false;
  auto ds = Dataset::open(dir, o);
  std::printf("{\"rows\": %llu", static_cast<unsigned long long>(ds->rows()));
  for (unsigned t = 1; t <= max_threads; ++t) {
    const Probe p = memory_limit(ds->data(), ds->rows(), t);
    std::printf(", \"probe_%u\": %.0f, \"probe_%u_ahead\": %zu, \"gather_%u\": %.0f", t,
                p.rows_per_s, t, p.ahead, t, gather_rows_per_s(*ds, t));
  }
  std::printf("}\n");
  return 0;
}


// The gather against the memory's limit on the same rows, with 1 and 2
// threads: counters rows/s of each and the share of the limit reached.
void BM_GatherOfMemoryLimit(benchmark::State& st) {
  auto& d = data();
  const auto threads = static_cast<unsigned>(st.range(0));
  for (auto _ : st) {
    const Probe p = memory_limit(d.ds->data(), d.rows, threads);
    const double g = gather_rows_per_s(*d.ds, threads);
    st.counters["probe_Mrows_s"] = p.rows_per_s / 1e6;
    st.counters["probe_ahead"] = static_cast<double>(p.ahead);
    st.counters["gather_Mrows_s"] = g / 1e6;
    st.counters["gather_of_limit"] = g / p.rows_per_s;
  }
}

// Wall-clock time throughout: with workers, the caller's CPU time is not the cost.
BENCHMARK(BM_Gather_PlainLoop)->MinTime(0.5)->UseRealTime();
BENCHMARK(BM_Gather_PlainLoop_SmallPages)->MinTime(0.5)->UseRealTime();
BENCHMARK(BM_Gather_A2pack)->Arg(1)->Arg(2)->MinTime(0.5)->UseRealTime();
BENCHMARK(BM_GatherColumns_A2pack)->Arg(1)->Arg(2)->MinTime(0.5)->UseRealTime();
BENCHMARK(BM_GatherInterleaved)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Load_PlainRead)->Unit(benchmark::kMillisecond)->MinTime(1.0)->UseRealTime();
BENCHMARK(BM_Load_A2pack)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(1.0)->UseRealTime();
BENCHMARK(BM_Build)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SelectSql)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SamplerEpoch)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK(BM_SamplerFill)->Args({4'000'000, 0})->Args({4'000'000, 1})->Args({100'000'000, 0})
    ->Args({100'000'000, 1})->MinTime(0.3);
BENCHMARK(BM_GatherOfMemoryLimit)->Arg(1)->Arg(2)->Iterations(1)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  // Our own flags first: --make-dataset=DIR [--rows=N] writes a dataset and
  // exits, --probe=DIR [--threads=T] measures DIR's rows and exits.
  std::string make, probe;
  unsigned threads = 2;
  uint64_t rows = bench_rows();
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--make-dataset=", 0) == 0) make = a.substr(15);
    else if (a.rfind("--rows=", 0) == 0) rows = std::strtoull(a.c_str() + 7, nullptr, 10);
    else if (a.rfind("--probe=", 0) == 0) probe = a.substr(8);
    else if (a.rfind("--threads=", 0) == 0) threads = static_cast<unsigned>(std::stoul(a.substr(10)));
    else rest.push_back(argv[i]);
  }
  if (!probe.empty()) return probe_main(probe, std::max(threads, 1u));
  if (!make.empty()) {
    SyntheticSource src(rows);
    BuildOptions o;
    o.overwrite = true;
    auto t0 = std::chrono::steady_clock::now();
    auto r = build(src, make, o);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("built %s: %llu rows, %llu runs in %.2fs (%.1f M rows/s)\n", make.c_str(),
                static_cast<unsigned long long>(r.total_rows),
                static_cast<unsigned long long>(r.total_runs), s, static_cast<double>(r.total_rows) / s / 1e6);
    return 0;
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
