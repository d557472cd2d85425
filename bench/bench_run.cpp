// Run codec throughput: v1 and v2 decode into the columnar batch form (MB/s
// of input, steps/s), single-run decode, v2 encode, and CRC32C hardware vs the
// table fallback (the named baseline) in the same run.
#include <benchmark/benchmark.h>

#include <vector>

#include "base/crc32c.hpp"
#include "engine/generator.hpp"
#include "run/batch.hpp"
#include "run/codec.hpp"

using namespace a2pack;

namespace {

struct Corpus {
  std::vector<std::string> v1, v2;
  uint64_t steps = 0;
  uint64_t bytes_v1 = 0, bytes_v2 = 0;
};

// 64 realistic runs from the greedy policy (branches on every step).
const Corpus& corpus() {
  static Corpus c = [] {
    Corpus c;
    engine::GenOptions o;
    o.policy = engine::Policy::greedy;
    for (uint64_t i = 0; i < 64; ++i) {
      run::Run r = engine::play_game(o, 1000 + i);
      c.steps += r.size();
      c.v2.push_back(run::encode_v2(r));
      c.v1.push_back(run::encode_v1(r, true));
      c.bytes_v2 += c.v2.back().size();
      c.bytes_v1 += c.v1.back().size();
    }
    return c;
  }();
  return c;
}

std::vector<run::Payload> payloads(const std::vector<std::string>& v) {
  std::vector<run::Payload> p;
  for (auto& s : v) p.push_back({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  return p;
}

void decode_batch(benchmark::State& st, bool v2) {
  const Corpus& c = corpus();
  auto p = payloads(v2 ? c.v2 : c.v1);
  uint32_t workers = static_cast<uint32_t>(st.range(0));
  for (auto _ : st) {
    run::Batch b = run::decode_batch(p.data(), p.size(), workers);
    benchmark::DoNotOptimize(b.boards.data());
  }
  uint64_t bytes = v2 ? c.bytes_v2 : c.bytes_v1;
  st.SetBytesProcessed(static_cast<int64_t>(bytes * st.iterations()));
  st.counters["steps/s"] = benchmark::Counter(static_cast<double>(c.steps * st.iterations()),
                                              benchmark::Counter::kIsRate);
}

void BM_DecodeBatchV2(benchmark::State& st) { decode_batch(st, true); }
void BM_DecodeBatchV1(benchmark::State& st) { decode_batch(st, false); }
BENCHMARK(BM_DecodeBatchV2)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_DecodeBatchV1)->Arg(1)->Arg(2)->UseRealTime();

void BM_DecodeSingleV2(benchmark::State& st) {
  const Corpus& c = corpus();
  for (auto _ : st)
    for (auto& s : c.v2) {
      run::Run r = run::decode(reinterpret_cast<const uint8_t*>(s.data()), s.size());
      benchmark::DoNotOptimize(r.boards.data());
    }
  st.SetBytesProcessed(static_cast<int64_t>(c.bytes_v2 * st.iterations()));
}
BENCHMARK(BM_DecodeSingleV2);

void BM_EncodeV2(benchmark::State& st) {
  const Corpus& c = corpus();
  std::vector<run::Run> runs;
  for (auto& s : c.v2) runs.push_back(run::decode(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  for (auto _ : st)
    for (auto& r : runs) benchmark::DoNotOptimize(run::encode_v2(r));
  st.SetBytesProcessed(static_cast<int64_t>(c.bytes_v2 * st.iterations()));
}
BENCHMARK(BM_EncodeV2);

std::vector<uint8_t>& crc_data() {
  static std::vector<uint8_t> d = [] {
    std::vector<uint8_t> v(1 << 24);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    return v;
  }();
  return d;
}

void BM_Crc32cHardware(benchmark::State& st) {
  auto& d = crc_data();
  if (!crc32c::hardware_available()) {
    st.SkipWithError("no SSE4.2");
    return;
  }
  for (auto _ : st) benchmark::DoNotOptimize(crc32c::extend_hardware(0, d.data(), d.size()));
  st.SetBytesProcessed(static_cast<int64_t>(d.size() * st.iterations()));
}
void BM_Crc32cTable(benchmark::State& st) {
  auto& d = crc_data();
  for (auto _ : st) benchmark::DoNotOptimize(crc32c::extend_table(0, d.data(), d.size()));
  st.SetBytesProcessed(static_cast<int64_t>(d.size() * st.iterations()));
}
BENCHMARK(BM_Crc32cHardware);
BENCHMARK(BM_Crc32cTable);

}  // namespace

BENCHMARK_MAIN();
