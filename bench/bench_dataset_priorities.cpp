// Prioritized replay's priorities (order/priorities.hpp) on their own, at
// 1 M, 10 M and 100 M rows (100 M take about 0.51 GB): a learner's step of
// sampling 4 096 rows with their importance weights and updating the same
// 4 096 rows' priorities, and each half alone; sampling from the newest 1 %
// of the rows (a recency range); saving and loading the .npy.
// (Named bench_dataset_*: the orders are built with the dataset.)
#include <benchmark/benchmark.h>

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "order/priorities.hpp"

using a2pack::order::Priorities;

namespace {

constexpr size_t kBatch = 4096;

// One set of priorities per row count, kept for the process: rows of
// priorities spread over three orders of magnitude.
Priorities& priorities(uint64_t n) {
  static std::map<uint64_t, std::unique_ptr<Priorities>> made;
  auto& p = made[n];
  if (!p) {
    p = std::make_unique<Priorities>(n, 0.6, 0.4, 1.0f);
    std::mt19937_64 rng(n);
    std::uniform_real_distribution<float> value(1e-3f, 1.0f);
    std::vector<int64_t> idx(1 << 20);
    std::vector<float> val(idx.size());
    for (uint64_t first = 0; first < n; first += idx.size()) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(idx.size(), n - first));
      for (size_t i = 0; i < k; ++i) {
        idx[i] = static_cast<int64_t>(first + i);
        val[i] = value(rng);
      }
      p->update(idx.data(), val.data(), k);
    }
  }
  return *p;
}

// New priorities for a batch (as a learner's TD errors would be).
std::vector<float> new_values(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(1e-3f, 1.0f);
  std::vector<float> v(kBatch);
  for (float& x : v) x = value(rng);
  return v;
}

void BM_SampleUpdate(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  Priorities& p = priorities(n);
  std::vector<int64_t> idx(kBatch);
  std::vector<float> w(kBatch);
  const std::vector<float> v = new_values(1);
  uint64_t batch = 0;
  for (auto _ : state) {
    p.sample(0, n, kBatch, 7, batch++, idx.data(), w.data());
    p.update(idx.data(), v.data(), kBatch);
    benchmark::DoNotOptimize(w.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

void BM_Sample(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  Priorities& p = priorities(n);
  std::vector<int64_t> idx(kBatch);
  std::vector<float> w(kBatch);
  uint64_t batch = 0;
  for (auto _ : state) {
    p.sample(0, n, kBatch, 7, batch++, idx.data(), w.data());
    benchmark::DoNotOptimize(w.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

// Rows spread over the whole range (as a sample's are), not sorted.
void BM_Update(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  Priorities& p = priorities(n);
  std::mt19937_64 rng(3);
  std::vector<int64_t> idx(kBatch);
  const std::vector<float> v = new_values(2);
  for (auto _ : state) {
    state.PauseTiming();
    for (int64_t& i : idx) i = static_cast<int64_t>(rng() % n);
    state.ResumeTiming();
    p.update(idx.data(), v.data(), kBatch);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

// The newest 1 % of the rows (recency), a range that starts inside a block.
void BM_SampleRecent(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  Priorities& p = priorities(n);
  std::vector<int64_t> idx(kBatch);
  std::vector<float> w(kBatch);
  const uint64_t lo = n - n / 100 - 3;
  uint64_t batch = 0;
  for (auto _ : state) {
    p.sample(lo, n, kBatch, 7, batch++, idx.data(), w.data());
    benchmark::DoNotOptimize(w.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

std::string npy_path() {
  return (std::filesystem::temp_directory_path() / "a2pack-bench-priorities.npy").string();
}

void BM_Save(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  Priorities& p = priorities(n);
  for (auto _ : state) p.save(npy_path());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(float)));
}

void BM_Load(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  priorities(n).save(npy_path());
  for (auto _ : state) benchmark::DoNotOptimize(Priorities::load(npy_path(), 0.6, 0.4, n));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(float)));
  std::filesystem::remove(npy_path());
}

}  // namespace

BENCHMARK(BM_SampleUpdate)->Arg(1'000'000)->Arg(10'000'000)->Arg(100'000'000)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_Sample)->Arg(1'000'000)->Arg(10'000'000)->Arg(100'000'000)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_Update)->Arg(1'000'000)->Arg(10'000'000)->Arg(100'000'000)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_SampleRecent)->Arg(1'000'000)->Arg(100'000'000)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_Save)->Arg(10'000'000)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK(BM_Load)->Arg(10'000'000)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

BENCHMARK_MAIN();
