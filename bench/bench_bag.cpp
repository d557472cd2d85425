// Bagz record files in C++: a2pack's batch reader and writer against a
// record-at-a-time baseline that does what a straightforward Bagz reader does
// (two preads per record — its limits, then its bytes — and one
// ZSTD_decompress into a fresh string; writes compress one record at a time
// and append). Same files, same machine, same binary; the ratio column of the
// report is a2pack / baseline.
//
// Payloads are real runs from the engine: random-policy games (~1 KiB of v2
// bytes) and expectimax depth-2 games (~60 KiB), a pool cycled to the record
// count. The Python comparison against the bagz package itself is
// bench/bag_compare.py.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bag/reader.hpp"
#include "bag/writer.hpp"
#include "engine/generator.hpp"
#include "run/codec.hpp"

using namespace a2pack;

namespace {

struct DataSet {
  std::vector<std::string> pool;
  size_t count;
};

const DataSet& dataset(int kind) {
  static std::map<int, DataSet> sets;
  auto it = sets.find(kind);
  if (it != sets.end()) return it->second;
  DataSet d;
  engine::GenOptions o;
  size_t pool;
  if (kind == 0) {
    o.policy = engine::Policy::random;
    pool = 4000;
    d.count = 200000;
  } else {
    o.policy = engine::Policy::expectimax;
    o.depth = 2;
    pool = 100;
    d.count = 5000;
  }
  for (size_t i = 0; i < pool; ++i)
    d.pool.push_back(run::encode_v2(engine::play_game(o, engine::run_seed(7, i))));
  return sets.emplace(kind, std::move(d)).first->second;
}

std::string bench_dir() {
  static std::string dir = [] {
    std::string t = (std::filesystem::temp_directory_path() / "a2pack-bench-bag-XXXXXX").string();
    return std::string(::mkdtemp(t.data()));
  }();
  return dir;
}

// The file of (kind, compressed), written once by a2pack.
const std::string& file_for(int kind, bool z) {
  static std::map<std::pair<int, bool>, std::string> files;
  auto key = std::make_pair(kind, z);
  auto it = files.find(key);
  if (it != files.end()) return it->second;
  const DataSet& d = dataset(kind);
  std::string path = bench_dir() + "/k" + std::to_string(kind) + (z ? ".bagz" : ".bag");
  bag::Writer w(path, {});
  for (size_t i = 0; i < d.count; ++i) {
    const auto& r = d.pool[i % d.pool.size()];
    w.write(reinterpret_cast<const uint8_t*>(r.data()), r.size());
  }
  w.commit();
  return files.emplace(key, path).first->second;
}

// ------------------------------------------------------------ baseline

class BaselineReader {
 public:
  BaselineReader(const std::string& path, bool z) : z_(z) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    off_t size = ::lseek(fd_, 0, SEEK_END);
    uint64_t start;
    pread_all(&start, 8, static_cast<uint64_t>(size) - 8);
    limits_at_ = start;
    count_ = (static_cast<uint64_t>(size) - start) / 8;
    dctx_ = ZSTD_createDCtx();
  }
  ~BaselineReader() {
    ::close(fd_);
    ZSTD_freeDCtx(dctx_);
  }
  uint64_t size() const { return count_; }
  std::string read(uint64_t i) {
    uint64_t lim[2] = {0, 0};
    if (i == 0) pread_all(&lim[1], 8, limits_at_);
    else pread_all(lim, 16, limits_at_ + 8 * (i - 1));
    std::string raw(lim[1] - lim[0], '\0');
    pread_all(raw.data(), raw.size(), lim[0]);
    if (!z_ || raw.empty()) return raw;
    std::string out(ZSTD_getFrameContentSize(raw.data(), raw.size()), '\0');
    ZSTD_decompressDCtx(dctx_, out.data(), out.size(), raw.data(), raw.size());
    return out;
  }

 private:
  void pread_all(void* p, size_t n, uint64_t off) {
    if (::pread(fd_, p, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) std::abort();
  }
  bool z_;
  int fd_;
  uint64_t limits_at_, count_;
  ZSTD_DCtx* dctx_;
};

void report(benchmark::State& st, uint64_t records, uint64_t bytes) {
  st.counters["records/s"] = benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsRate);
  st.SetBytesProcessed(static_cast<int64_t>(bytes));
}

// ------------------------------------------------------------ sequential

void BM_Sequential_A2pack(benchmark::State& st) {
  int kind = static_cast<int>(st.range(0));
  bool z = st.range(1);
  bag::Reader r({file_for(kind, z)}, {});
  // Batches of about 4 MiB stored, as the Python iterator reads them.
  uint64_t chunk = std::max<uint64_t>(16, (4u << 20) / std::max<uint64_t>(1, r.records_bytes() / r.size()));
  uint64_t recs = 0, bytes = 0;
  for (auto _ : st) {
    for (uint64_t s = 0; s < r.size(); s += chunk) {
      bag::Batch b = r.read_range(s, std::min<uint64_t>(chunk, r.size() - s));
      bytes += b.bytes;
      recs += b.size();
      benchmark::DoNotOptimize(b.data.get());
    }
  }
  report(st, recs, bytes);
}

void BM_Sequential_Baseline(benchmark::State& st) {
  int kind = static_cast<int>(st.range(0));
  bool z = st.range(1);
  BaselineReader r(file_for(kind, z), z);
  uint64_t recs = 0, bytes = 0;
  for (auto _ : st) {
    for (uint64_t i = 0; i < r.size(); ++i) {
      std::string s = r.read(i);
      bytes += s.size();
      ++recs;
      benchmark::DoNotOptimize(s.data());
    }
  }
  report(st, recs, bytes);
}

// ------------------------------------------------------------ random batches of 256

std::vector<std::vector<uint64_t>> batches_for(uint64_t n) {
  std::mt19937_64 rng(11);
  std::vector<std::vector<uint64_t>> v(64, std::vector<uint64_t>(256));
  for (auto& b : v)
    for (auto& i : b) i = rng() % n;
  return v;
}

void BM_Random256_A2pack(benchmark::State& st) {
  int kind = static_cast<int>(st.range(0));
  bool z = st.range(1);
  bag::ReaderOptions o;
  o.access_pattern = bag::AccessPattern::random;
  bag::Reader r({file_for(kind, z)}, o);
  auto batches = batches_for(r.size());
  uint64_t recs = 0, bytes = 0;
  size_t k = 0;
  for (auto _ : st) {
    const auto& idx = batches[k++ % batches.size()];
    bag::Batch b = r.read(idx.data(), idx.size());
    bytes += b.bytes;
    recs += b.size();
  }
  report(st, recs, bytes);
}

void BM_Random256_Baseline(benchmark::State& st) {
  int kind = static_cast<int>(st.range(0));
  bool z = st.range(1);
  BaselineReader r(file_for(kind, z), z);
  auto batches = batches_for(r.size());
  uint64_t recs = 0, bytes = 0;
  size_t k = 0;
  for (auto _ : st) {
    for (uint64_t i : batches[k++ % batches.size()]) {
      std::string s = r.read(i);
      bytes += s.size();
      ++recs;
    }
  }
  report(st, recs, bytes);
}

// ------------------------------------------------------------ writing

void BM_Write_A2pack(benchmark::State& st) {
  int kind = static_cast<int>(st.range(0));
  bool z = st.range(1);
  const DataSet& d = dataset(kind);
  std::string all;
  std::vector<uint64_t> off{0};
  for (size_t i = 0; i < d.count; ++i) {
    all += d.pool[i % d.pool.size()];
    off.push_back(all.size());
  }
  uint64_t recs = 0;
  std::string path = bench_dir() + (z ? "/w.bagz" : "/w.bag");
  for (auto _ : st) {
    bag::Writer w(path, {});
    w.write_batch(reinterpret_cast<const uint8_t*>(all.data()), off.data(), d.count);
    w.commit();
    recs += d.count;
  }
  report(st, recs, recs / d.count * all.size());
}

void BM_Write_Baseline(benchmark::State& st) {
  int kind = static_cast<int>(st.range(0));
  bool z = st.range(1);
  const DataSet& d = dataset(kind);
  std::string path = bench_dir() + (z ? "/b.bagz" : "/b.bag");
  uint64_t recs = 0, bytes = 0;
  ZSTD_CCtx* c = ZSTD_createCCtx();
  for (auto _ : st) {
    FILE* f = std::fopen(path.c_str(), "wb");
    std::vector<uint64_t> limits;
    uint64_t end = 0;
    std::string buf;
    for (size_t i = 0; i < d.count; ++i) {
      const auto& r = d.pool[i % d.pool.size()];
      bytes += r.size();
      if (z) {
        buf.resize(ZSTD_compressBound(r.size()));
        size_t n = ZSTD_compressCCtx(c, buf.data(), buf.size(), r.data(), r.size(), 3);
        std::fwrite(buf.data(), 1, n, f);
        end += n;
      } else {
        std::fwrite(r.data(), 1, r.size(), f);
        end += r.size();
      }
      limits.push_back(end);
    }
    std::fwrite(limits.data(), 8, limits.size(), f);
    std::fflush(f);
    ::fsync(::fileno(f));  // a2pack's writer is durable: compare like with like
    std::fclose(f);
    recs += d.count;
  }
  ZSTD_freeCCtx(c);
  report(st, recs, bytes);
}

// Args: {data set (0 = ~1 KiB runs, 1 = ~60 KiB runs), compressed}.
void args(benchmark::internal::Benchmark* b) {
  for (int kind : {0, 1})
    for (int z : {0, 1}) b->Args({kind, z});
  b->Unit(benchmark::kMillisecond)->MinTime(0.5)->UseRealTime();
}

BENCHMARK(BM_Sequential_A2pack)->Apply(args);
BENCHMARK(BM_Sequential_Baseline)->Apply(args);
BENCHMARK(BM_Random256_A2pack)->Apply(args);
BENCHMARK(BM_Random256_Baseline)->Apply(args);
BENCHMARK(BM_Write_A2pack)->Apply(args);
BENCHMARK(BM_Write_Baseline)->Apply(args);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::filesystem::remove_all(bench_dir());
  return 0;
}
