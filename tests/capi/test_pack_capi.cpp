// The pack section of the C API, through the shared library and nothing but
// a2pack.h: builder, reader, batch decode, iterator, stats, validation, JSONL
// and the errors a caller sees.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "a2pack.h"
#include "capi_test_util.hpp"

namespace {

using capitest::fixture_bytes;
using capitest::fixture_path;
using capitest::read_bytes;

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

struct TmpDir {
  std::string path;
  TmpDir() {
    char tmpl[] = "/tmp/a2pack-capi-pack-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TmpDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string operator/(const std::string& n) const { return path + "/" + n; }
};

// A run file made through the C API: `n` steps, branches on even steps,
// encoded as v1 (no branches) when `v1`.
std::vector<uint8_t> make_run(uint32_t seed, size_t n, bool v1) {
  std::vector<uint64_t> boards(n);
  std::vector<uint8_t> moves(n), legal(n), present(n);
  std::vector<float> values(4 * n);
  uint64_t x = seed * 2654435761ull + 7;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    boards[i] = x;
    moves[i] = static_cast<uint8_t>((x >> 33) % 4);
    present[i] = i % 2 == 0;
    legal[i] = static_cast<uint8_t>(0xF);
    for (int k = 0; k < 4; ++k) values[4 * i + k] = 0.125f * static_cast<float>(k + i % 3);
  }
  a2pack_run_meta m{};
  m.size = sizeof m;
  m.steps = static_cast<uint32_t>(n);
  m.start_unix_s = 1700000000 + seed;
  m.elapsed_s = 1.5f;
  m.max_score = 100 * seed;
  m.highest_tile = seed % 2 ? 1024 : 2048;
  a2pack_run* run = nullptr;
  EXPECT_EQ(a2pack_run_create(&m, n, boards.data(), moves.data(), v1 ? nullptr : values.data(),
                              v1 ? nullptr : legal.data(), v1 ? nullptr : present.data(), x, &run),
            A2PACK_OK)
      << a2pack_last_error();
  uint8_t* data = nullptr;
  size_t len = 0;
  EXPECT_EQ(a2pack_run_encode(run, v1 ? A2PACK_RUN_V1 : A2PACK_RUN_V2, 0, &data, &len), A2PACK_OK)
      << a2pack_last_error();
  std::vector<uint8_t> out(data, data + len);
  a2pack_free(data);
  a2pack_run_close(run);
  return out;
}

struct PackDeleter {
  void operator()(a2pack_pack* p) const { a2pack_pack_close(p); }
};
using Pack = std::unique_ptr<a2pack_pack, PackDeleter>;

Pack open(const std::string& path, int mmap = 1) {
  a2pack_pack_options o;
  a2pack_pack_options_init(&o);
  o.use_mmap = mmap;
  a2pack_pack* p = nullptr;
  EXPECT_EQ(a2pack_pack_open(path.c_str(), &o, &p), A2PACK_OK) << a2pack_last_error();
  return Pack(p);
}

// A folder of mixed runs, packed with the given compression.
struct Fixture {
  TmpDir dir;
  std::vector<std::vector<uint8_t>> runs;
  std::string pack;
  explicit Fixture(a2pack_pack_compression c = A2PACK_PACK_COMPRESS_NONE, size_t count = 24) {
    ::mkdir((dir / "runs").c_str(), 0755);
    for (uint32_t i = 0; i < count; ++i) {
      runs.push_back(make_run(i, 20 + i * 3, i % 3 == 1));
      char name[64];
      std::snprintf(name, sizeof name, "runs/r%04u.a2run2", i);
      write_bytes(dir / name, runs.back());
    }
    pack = dir / "p.a2pack";
    a2pack_pack_writer_options o;
    a2pack_pack_writer_options_init(&o);
    o.compression = c;
    o.workers = 2;
    a2pack_pack_build_summary s{};
    s.size = sizeof s;
    EXPECT_EQ(a2pack_pack_dir((dir / "runs").c_str(), pack.c_str(), &o, nullptr, nullptr, &s),
              A2PACK_OK)
        << a2pack_last_error();
    EXPECT_EQ(s.entries, count);
  }
};

std::string slurp(const std::string& p) {
  auto b = read_bytes(p);
  return std::string(b.begin(), b.end());
}

}  // namespace

TEST(CapiPack, ApiTableHasThePackSection) {
  const a2pack_api_table* t = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(t, nullptr);
  ASSERT_NE(t->pack, nullptr);
  EXPECT_EQ(t->pack->size, sizeof(a2pack_pack_api));
  EXPECT_EQ(t->pack->open, &a2pack_pack_open);
  EXPECT_EQ(t->pack->decode_batch, &a2pack_pack_decode_batch);
  EXPECT_EQ(t->pack->dir, &a2pack_pack_dir);
}

TEST(CapiPack, RoundTripBothOpenModes) {
  Fixture f;
  for (int mmap : {1, 0}) {
    Pack p = open(f.pack, mmap);
    ASSERT_EQ(a2pack_pack_len(p.get()), f.runs.size());
    for (uint64_t i = 0; i < f.runs.size(); ++i) {
      a2pack_run_kind k;
      ASSERT_EQ(a2pack_pack_kind(p.get(), i, &k), A2PACK_OK);
      EXPECT_EQ(k, i % 3 == 1 ? A2PACK_RUN_V1 : A2PACK_RUN_V2);
      uint8_t* data = nullptr;
      size_t len = 0;
      ASSERT_EQ(a2pack_pack_read(p.get(), i, 0, &data, &len), A2PACK_OK) << a2pack_last_error();
      EXPECT_EQ(std::vector<uint8_t>(data, data + len), f.runs[i]);
      a2pack_free(data);
      a2pack_run* r = nullptr;
      ASSERT_EQ(a2pack_pack_decode(p.get(), i, 0, &r), A2PACK_OK);
      EXPECT_EQ(a2pack_run_step_count(r), 20 + i * 3);
      a2pack_run_close(r);
      a2pack_pack_entry e{};
      e.size = sizeof e;
      ASSERT_EQ(a2pack_pack_entry_info(p.get(), i, &e), A2PACK_OK);
      EXPECT_EQ(e.offset % 4096, 0u);
      EXPECT_EQ(e.raw_length, f.runs[i].size());
      EXPECT_NE(e.crc32c, 0u);
      const uint8_t* view = nullptr;
      size_t vlen = 0;
      a2pack_status st = a2pack_pack_get_slice(p.get(), i, 0, &view, &vlen);
      if (mmap) {
        ASSERT_EQ(st, A2PACK_OK);
        EXPECT_EQ(std::vector<uint8_t>(view, view + vlen), f.runs[i]);
      } else {
        EXPECT_EQ(st, A2PACK_E_UNSUPPORTED);
        EXPECT_EQ(view, nullptr);
      }
    }
  }
}

TEST(CapiPack, DecodeRunsAndBatch) {
  Fixture f(A2PACK_PACK_COMPRESS_ZSTD);
  Pack p = open(f.pack);
  std::vector<uint64_t> idx = {23, 4, 4, 0, 17};
  std::vector<a2pack_run*> runs(idx.size());
  ASSERT_EQ(a2pack_pack_decode_runs(p.get(), idx.data(), idx.size(), 2, 0, runs.data()), A2PACK_OK)
      << a2pack_last_error();
  a2pack_run_batch* b = nullptr;
  ASSERT_EQ(a2pack_pack_decode_batch(p.get(), idx.data(), idx.size(), 2, A2PACK_PACK_NO_VERIFY, &b),
            A2PACK_OK);
  a2pack_run_columns c{};
  c.size = sizeof c;
  ASSERT_EQ(a2pack_run_batch_columns(b, &c), A2PACK_OK);
  ASSERT_EQ(c.n_runs, idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    size_t n = a2pack_run_step_count(runs[k]);
    EXPECT_EQ(c.step_offsets[k + 1] - c.step_offsets[k], n);
    std::vector<uint64_t> boards(n);
    ASSERT_EQ(a2pack_run_get_steps(runs[k], 0, n, boards.data(), nullptr, nullptr, nullptr, nullptr),
              A2PACK_OK);
    EXPECT_EQ(0, std::memcmp(boards.data(), c.boards + c.step_offsets[k], 8 * n));
    EXPECT_EQ(c.final_boards[k], a2pack_run_final_board(runs[k]));
    a2pack_run_close(runs[k]);
  }
  a2pack_run_batch_close(b);
}

// lz4 entries through the C API: written by pack_dir with
// A2PACK_PACK_COMPRESS_LZ4, flagged A2PACK_PACK_ENTRY_LZ4 with the run's
// length as raw_length, read back byte for byte in both open modes.
TEST(CapiPack, Lz4EntriesRoundTrip) {
  Fixture f(A2PACK_PACK_COMPRESS_LZ4);
  for (int mmap : {1, 0}) {
    Pack p = open(f.pack, mmap);
    size_t lz4 = 0;
    for (uint64_t i = 0; i < f.runs.size(); ++i) {
      a2pack_pack_entry e{};
      e.size = sizeof e;
      ASSERT_EQ(a2pack_pack_entry_info(p.get(), i, &e), A2PACK_OK);
      EXPECT_TRUE(e.flags == A2PACK_PACK_ENTRY_LZ4 || e.flags == A2PACK_PACK_ENTRY_STORED);
      lz4 += e.flags == A2PACK_PACK_ENTRY_LZ4;
      EXPECT_EQ(e.raw_length, f.runs[i].size());
      if (e.flags == A2PACK_PACK_ENTRY_LZ4) EXPECT_LT(e.length, e.raw_length);
      uint8_t* data = nullptr;
      size_t len = 0;
      ASSERT_EQ(a2pack_pack_read(p.get(), i, 0, &data, &len), A2PACK_OK) << a2pack_last_error();
      EXPECT_EQ(std::vector<uint8_t>(data, data + len), f.runs[i]);
      a2pack_free(data);
    }
    EXPECT_GT(lz4, f.runs.size() / 2);
    EXPECT_EQ(a2pack_pack_validate(p.get(), 1, 2, nullptr, nullptr), A2PACK_OK) << a2pack_last_error();
  }
}

// lz4_level: HC levels pack smaller than the default; an options struct of
// a caller compiled before lz4_level existed (its size ends before the field)
// gets the default level; levels out of range and unknown compression values
// are INVALID_ARGUMENT naming the value.
TEST(CapiPack, Lz4LevelsAndOlderOptionStructs) {
  Fixture f(A2PACK_PACK_COMPRESS_NONE, 12);
  auto build = [&](a2pack_pack_writer_options o, const char* name, uint64_t* stored) {
    a2pack_pack_build_summary s{};
    s.size = sizeof s;
    a2pack_status st = a2pack_pack_dir((f.dir / "runs").c_str(), (f.dir / name).c_str(), &o,
                                       nullptr, nullptr, &s);
    if (stored) *stored = s.stored_bytes;
    return st;
  };
  a2pack_pack_writer_options o;
  a2pack_pack_writer_options_init(&o);
  EXPECT_EQ(o.lz4_level, 0);
  o.compression = A2PACK_PACK_COMPRESS_LZ4;
  uint64_t fast = 0, hc = 0, old = 0;
  ASSERT_EQ(build(o, "fast.a2pack", &fast), A2PACK_OK) << a2pack_last_error();
  o.lz4_level = 12;
  ASSERT_EQ(build(o, "hc.a2pack", &hc), A2PACK_OK) << a2pack_last_error();
  EXPECT_LT(hc, fast);
  a2pack_pack_writer_options older = o;  // lz4_level 12, but past the caller's size
  older.size = offsetof(a2pack_pack_writer_options, lz4_level);
  ASSERT_EQ(build(older, "old.a2pack", &old), A2PACK_OK) << a2pack_last_error();
  EXPECT_EQ(old, fast);
  EXPECT_EQ(slurp(f.dir / "old.a2pack"), slurp(f.dir / "fast.a2pack"));
  o.lz4_level = 13;
  EXPECT_EQ(build(o, "bad.a2pack", nullptr), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("lz4 level"), std::string::npos) << a2pack_last_error();
  o.lz4_level = 0;
  o.compression = static_cast<a2pack_pack_compression>(3);
  EXPECT_EQ(build(o, "bad.a2pack", nullptr), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("unknown compression 3"), std::string::npos)
      << a2pack_last_error();
  EXPECT_FALSE(std::ifstream(f.dir / "bad.a2pack").good());
}

TEST(CapiPack, BadCallsAreErrorsNotCrashes) {
  Fixture f(A2PACK_PACK_COMPRESS_NONE, 3);
  Pack p = open(f.pack);
  a2pack_run* r = reinterpret_cast<a2pack_run*>(1);
  EXPECT_EQ(a2pack_pack_decode(p.get(), 3, 0, &r), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(r, nullptr);
  EXPECT_NE(std::string(a2pack_last_error()).find("entry 3"), std::string::npos);
  EXPECT_EQ(a2pack_pack_decode(nullptr, 0, 0, &r), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_pack_decode(p.get(), 0, 0x80, &r), A2PACK_E_INVALID_ARGUMENT);
  uint64_t idx[] = {0, 99};
  a2pack_run* two[2] = {reinterpret_cast<a2pack_run*>(1), reinterpret_cast<a2pack_run*>(1)};
  EXPECT_EQ(a2pack_pack_decode_runs(p.get(), idx, 2, 1, 0, two), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(two[0], nullptr);
  EXPECT_EQ(two[1], nullptr);
  a2pack_run_batch* b = nullptr;
  EXPECT_EQ(a2pack_pack_decode_batch(p.get(), nullptr, 2, 1, 0, &b), A2PACK_E_INVALID_ARGUMENT);
  ASSERT_EQ(a2pack_pack_decode_batch(p.get(), nullptr, 0, 1, 0, &b), A2PACK_OK);
  a2pack_run_batch_close(b);
  uint64_t small[2];
  EXPECT_EQ(a2pack_pack_permutation(p.get(), 1, 0, small, 2), A2PACK_E_INVALID_ARGUMENT);
  a2pack_pack* q = reinterpret_cast<a2pack_pack*>(1);
  EXPECT_EQ(a2pack_pack_open((f.dir / "missing").c_str(), nullptr, &q), A2PACK_E_NOT_FOUND);
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(a2pack_pack_open(fixture_path().c_str(), nullptr, &q), A2PACK_E_CORRUPT);
  EXPECT_EQ(a2pack_pack_len(nullptr), 0u);
  a2pack_pack_close(nullptr);
  a2pack_pack_iter_close(nullptr);
  a2pack_pack_writer_close(nullptr);
  a2pack_pack_options o{};
  o.size = 2;  // not initialised
  EXPECT_EQ(a2pack_pack_open(f.pack.c_str(), &o, &q), A2PACK_E_INVALID_ARGUMENT);
}

TEST(CapiPack, IteratorBatchesDependOnlyOnTheSeed) {
  Fixture f(A2PACK_PACK_COMPRESS_NONE, 21);
  Pack p = open(f.pack);
  std::vector<uint64_t> perm(21);
  ASSERT_EQ(a2pack_pack_permutation(p.get(), 1, 99, perm.data(), perm.size()), A2PACK_OK);
  auto epoch = [&](uint32_t workers, uint64_t seed) {
    a2pack_pack_iter_options o;
    a2pack_pack_iter_options_init(&o);
    o.batch_size = 4;
    o.shuffle = 1;
    o.seed = seed;
    o.workers = workers;
    a2pack_pack_iter* it = nullptr;
    EXPECT_EQ(a2pack_pack_iter_open(p.get(), &o, &it), A2PACK_OK);
    std::vector<uint64_t> order, boards;
    std::vector<size_t> sizes;
    for (;;) {
      a2pack_run_batch* b = nullptr;
      const uint64_t* ids = nullptr;
      size_t n = 0;
      EXPECT_EQ(a2pack_pack_iter_next(it, &b, &ids, &n), A2PACK_OK);
      if (!b) break;
      a2pack_run_columns c{};
      c.size = sizeof c;
      a2pack_run_batch_columns(b, &c);
      EXPECT_EQ(c.n_runs, n);
      sizes.push_back(n);
      order.insert(order.end(), ids, ids + n);
      boards.insert(boards.end(), c.boards, c.boards + c.n_steps);
      a2pack_run_batch_close(b);
    }
    a2pack_pack_iter_close(it);
    EXPECT_EQ(sizes, (std::vector<size_t>{4, 4, 4, 4, 4, 1}));
    return std::make_pair(order, boards);
  };
  auto one = epoch(1, 99);
  EXPECT_EQ(one.first, perm);
  EXPECT_EQ(epoch(2, 99), one);
  EXPECT_EQ(epoch(7, 99), one);
  EXPECT_NE(epoch(2, 100).first, one.first);
}

TEST(CapiPack, IteratorOutlivesItsPackHandle) {
  Fixture f(A2PACK_PACK_COMPRESS_NONE, 5);
  Pack p = open(f.pack);
  a2pack_pack_iter* it = nullptr;
  ASSERT_EQ(a2pack_pack_iter_open(p.get(), nullptr, &it), A2PACK_OK);
  p.reset();
  a2pack_run_batch* b = nullptr;
  ASSERT_EQ(a2pack_pack_iter_next(it, &b, nullptr, nullptr), A2PACK_OK) << a2pack_last_error();
  ASSERT_NE(b, nullptr);
  a2pack_run_batch_close(b);
  ASSERT_EQ(a2pack_pack_iter_next(it, &b, nullptr, nullptr), A2PACK_OK);
  EXPECT_EQ(b, nullptr);
  a2pack_pack_iter_close(it);
}

TEST(CapiPack, StatsHistogramsAndValidation) {
  Fixture f;
  Pack p = open(f.pack);
  a2pack_pack_stats s{};
  s.size = sizeof s;
  ASSERT_EQ(a2pack_pack_stats_get(p.get(), 2, &s), A2PACK_OK);
  EXPECT_EQ(s.count, 24u);
  EXPECT_EQ(s.min_len, 20u);
  EXPECT_EQ(s.max_len, 20u + 23 * 3);
  EXPECT_EQ(s.from_block, 1);
  EXPECT_EQ(s.p50, 20u + 12 * 3);  // round(0.5 * 23) = 12
  a2pack_pack_histograms h{};
  h.size = sizeof h;
  ASSERT_EQ(a2pack_pack_histograms_get(p.get(), 2, &h), A2PACK_OK);
  ASSERT_EQ(h.n_tiles, 2u);
  EXPECT_EQ(h.tile_values[0], 1024u);
  EXPECT_EQ(h.tile_counts[0] + h.tile_counts[1], 24u);
  ASSERT_EQ(h.n_engines, 1u);
  EXPECT_EQ(h.engine_present[0], 0);
  uint64_t calls = 0;
  auto progress = [](void* u, uint64_t done, uint64_t total) {
    ++*static_cast<uint64_t*>(u);
    return done <= total ? 0 : 1;
  };
  EXPECT_EQ(a2pack_pack_validate(p.get(), 1, 2, progress, &calls), A2PACK_OK) << a2pack_last_error();
  EXPECT_GE(calls, 1u);
  EXPECT_EQ(a2pack_pack_validate(p.get(), 0, 2, nullptr, nullptr), A2PACK_OK);
  // Corrupt one payload: quick validation may miss it, full does not; the
  // other entries still decode.
  auto bytes = read_bytes(f.pack);
  a2pack_pack_entry e{};
  e.size = sizeof e;
  a2pack_pack_entry_info(p.get(), 5, &e);
  bytes[e.offset + 3] ^= 0x10;
  write_bytes(f.dir / "bad.a2pack", bytes);
  Pack bad = open(f.dir / "bad.a2pack");
  EXPECT_EQ(a2pack_pack_validate(bad.get(), 1, 2, nullptr, nullptr), A2PACK_E_CHECKSUM);
  EXPECT_NE(std::string(a2pack_last_error()).find("entry 5"), std::string::npos);
  a2pack_run* r = nullptr;
  EXPECT_EQ(a2pack_pack_decode(bad.get(), 5, 0, &r), A2PACK_E_CHECKSUM);
  EXPECT_EQ(a2pack_pack_decode(bad.get(), 6, 0, &r), A2PACK_OK);
  a2pack_run_close(r);
}

TEST(CapiPack, JsonlIsTheSameForAnyWorkerCount) {
  Fixture f;
  Pack p = open(f.pack);
  for (a2pack_pack_jsonl_mode mode : {A2PACK_PACK_JSONL_RUNS, A2PACK_PACK_JSONL_STEPS}) {
    uint64_t b1 = 0, b3 = 0;
    ASSERT_EQ(a2pack_pack_to_jsonl(p.get(), (f.dir / "a.jsonl").c_str(), mode, 1, 0, nullptr,
                                   nullptr, &b1),
              A2PACK_OK)
        << a2pack_last_error();
    ASSERT_EQ(a2pack_pack_to_jsonl(p.get(), (f.dir / "b.jsonl").c_str(), mode, 3, 0, nullptr,
                                   nullptr, &b3),
              A2PACK_OK);
    EXPECT_EQ(b1, b3);
    std::string a = slurp(f.dir / "a.jsonl");
    EXPECT_EQ(a.size(), b1);
    EXPECT_EQ(a, slurp(f.dir / "b.jsonl"));
    EXPECT_EQ(a.rfind("{\"run_idx\":0,", 0), 0u) << a.substr(0, 80);
  }
  EXPECT_EQ(a2pack_pack_to_jsonl(p.get(), (f.dir / "c.jsonl").c_str(),
                                 static_cast<a2pack_pack_jsonl_mode>(5), 1, 0, nullptr, nullptr,
                                 nullptr),
            A2PACK_E_INVALID_ARGUMENT);
}

TEST(CapiPack, WriterStreamsAndSkipsBadInputs) {
  TmpDir dir;
  auto good = make_run(1, 30, false);
  std::vector<uint8_t> bad = good;
  bad.resize(bad.size() - 1);
  write_bytes(dir / "good.a2run2", good);
  write_bytes(dir / "bad.a2run2", bad);
  a2pack_pack_writer_options o;
  a2pack_pack_writer_options_init(&o);
  o.skip_bad = 1;
  std::vector<std::string> seen;
  o.on_bad_input = [](void* u, const char* path, a2pack_status st, const char* msg) {
    static_cast<std::vector<std::string>*>(u)->push_back(path);
    EXPECT_EQ(st, A2PACK_E_CORRUPT) << msg;
  };
  o.on_bad_input_user = &seen;
  a2pack_pack_writer* w = nullptr;
  ASSERT_EQ(a2pack_pack_writer_open((dir / "w.a2pack").c_str(), &o, &w), A2PACK_OK);
  EXPECT_EQ(a2pack_pack_writer_add(w, bad.data(), bad.size()), A2PACK_E_CORRUPT);
  EXPECT_EQ(a2pack_pack_writer_add(w, good.data(), good.size()), A2PACK_OK);
  std::string gp = dir / "good.a2run2", bp = dir / "bad.a2run2";
  const char* paths[] = {gp.c_str(), bp.c_str(), gp.c_str()};
  EXPECT_EQ(a2pack_pack_writer_add_files(w, paths, 3, nullptr, nullptr), A2PACK_OK);
  EXPECT_EQ(seen, (std::vector<std::string>{bp}));
  EXPECT_EQ(a2pack_pack_writer_count(w), 3u);
  EXPECT_NE(access((dir / "w.a2pack").c_str(), F_OK), 0);  // not there before finish
  a2pack_pack_build_summary s{};
  s.size = sizeof s;
  ASSERT_EQ(a2pack_pack_writer_finish(w, &s), A2PACK_OK);
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.skipped, 1u);
  EXPECT_EQ(a2pack_pack_writer_finish(w, nullptr), A2PACK_E_CLOSED);
  a2pack_pack_writer_close(w);
  Pack p = open(dir / "w.a2pack");
  EXPECT_EQ(a2pack_pack_len(p.get()), 3u);
  // Stop mode names the file.
  o.skip_bad = 0;
  ASSERT_EQ(a2pack_pack_writer_open((dir / "x.a2pack").c_str(), &o, &w), A2PACK_OK);
  EXPECT_EQ(a2pack_pack_writer_add_files(w, paths, 3, nullptr, nullptr), A2PACK_E_CORRUPT);
  EXPECT_NE(std::string(a2pack_last_error()).find("bad.a2run2"), std::string::npos);
  a2pack_pack_writer_close(w);
  EXPECT_NE(access((dir / "x.a2pack").c_str(), F_OK), 0);
}

TEST(CapiPack, FixtureRoundTrip) {
  auto fx = fixture_bytes();
  ASSERT_EQ(fx.size(), 28211u);
  TmpDir dir;
  a2pack_pack_writer* w = nullptr;
  ASSERT_EQ(a2pack_pack_writer_open((dir / "fx.a2pack").c_str(), nullptr, &w), A2PACK_OK);
  ASSERT_EQ(a2pack_pack_writer_add_file(w, fixture_path().c_str()), A2PACK_OK);
  ASSERT_EQ(a2pack_pack_writer_finish(w, nullptr), A2PACK_OK);
  a2pack_pack_writer_close(w);
  Pack p = open(dir / "fx.a2pack");
  uint8_t* data = nullptr;
  size_t len = 0;
  ASSERT_EQ(a2pack_pack_read(p.get(), 0, 0, &data, &len), A2PACK_OK);
  EXPECT_EQ(std::vector<uint8_t>(data, data + len), fx);
  a2pack_free(data);
  a2pack_pack_stats s{};
  s.size = sizeof s;
  ASSERT_EQ(a2pack_pack_stats_get(p.get(), 1, &s), A2PACK_OK);
  EXPECT_EQ(s.total_steps, 959u);
  ASSERT_EQ(a2pack_pack_to_jsonl(p.get(), (dir / "fx.jsonl").c_str(), A2PACK_PACK_JSONL_RUNS, 1, 0,
                                 nullptr, nullptr, nullptr),
            A2PACK_OK);
  std::string j = slurp(dir / "fx.jsonl");
  EXPECT_EQ(j.rfind("{\"run_idx\":0,\"steps\":959,\"start_unix_s\":1755927754,\"elapsed_s\":15.", 0), 0u)
      << j.substr(0, 120);
  EXPECT_NE(j.find("\"max_score\":20504,\"highest_tile\":2048,\"final_board\":1153202983915356187"),
            std::string::npos);
}
