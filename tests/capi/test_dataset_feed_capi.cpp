// The training feed through the C ABI: batches in exactly the sampler's
// order for any thread count and depth, every column equal to the rows it
// names, rank parts, checkpoints across epochs, held batches staying intact
// (producers wait instead), close with batches outstanding, fork, the
// pinning code with and without a CUDA runtime (a recording stand-in), the
// one-call advance and the producers keeping off the consumer's CPU.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "a2pack.h"

namespace {

namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/a2pack-capi-feed-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// One 32-byte row of the dataset layout.
struct __attribute__((packed)) Row {
  uint64_t board;
  uint8_t move, ev_legal;
  float ev[4];
  uint32_t run_id;
  uint16_t step_index;
};
static_assert(sizeof(Row) == 32);

// A dataset of `runs` runs of `steps` rows with distinct, checkable contents.
struct Fixture {
  TempDir dir;
  a2pack_dataset* ds = nullptr;
  const Row* rows = nullptr;
  uint64_t n = 0;
  Fixture(uint32_t runs = 30, uint32_t steps = 97) {
    std::vector<Row> rs;
    std::vector<a2pack_dataset_run_record> recs;
    for (uint32_t r = 0; r < runs; ++r) {
      for (uint32_t s = 0; s < steps; ++s) {
        uint64_t i = rs.size();
        Row x{};
        x.board = (i * 0x9E3779B97F4A7C15ull) ^ (i << 3);
        x.move = static_cast<uint8_t>(i % 4);
        x.ev_legal = static_cast<uint8_t>((i % 15) + 1) | static_cast<uint8_t>(1u << x.move);
        for (int k = 0; k < 4; ++k) x.ev[k] = (x.ev_legal >> k & 1) ? (k == x.move ? 1.0f : 0.25f * k) : 0.0f;
        x.run_id = r;
        x.step_index = static_cast<uint16_t>(s);
        rs.push_back(x);
      }
      a2pack_dataset_run_record rec{};
      rec.num_steps = steps;
      rec.max_score = r;
      rec.highest_tile = 2048;
      recs.push_back(rec);
    }
    std::string out = dir.path + "/ds";
    EXPECT_EQ(a2pack_dataset_build_from_rows(out.c_str(), rs.data(), rs.size(), recs.data(),
                                             recs.size(), nullptr, nullptr),
              A2PACK_OK)
        << a2pack_last_error();
    EXPECT_EQ(a2pack_dataset_open(out.c_str(), nullptr, &ds), A2PACK_OK) << a2pack_last_error();
    a2pack_dataset_info info{};
    info.size = sizeof info;
    EXPECT_EQ(a2pack_dataset_get_info(ds, &info), A2PACK_OK);
    rows = reinterpret_cast<const Row*>(info.data);
    n = info.rows;
  }
  ~Fixture() { a2pack_dataset_close(ds); }
};

a2pack_feed_options opts(uint64_t batch, uint32_t depth, uint32_t threads, uint64_t seed) {
  a2pack_feed_options o;
  a2pack_feed_options_init(&o);
  o.batch_size = batch;
  o.depth = depth;
  o.threads = threads;
  o.seed = seed;
  o.pin = A2PACK_FEED_PIN_OFF;
  // The order these tests compare with is a2pack_dataset_sampler's: the
  // stored permutation (the default index shuffle has its own tests).
  o.shuffle = A2PACK_FEED_SHUFFLE_STORED;
  return o;
}

a2pack_feed_column_view column(const a2pack_feed_batch* b, a2pack_feed_column c) {
  a2pack_feed_column_view v{};
  v.size = sizeof v;
  EXPECT_EQ(a2pack_feed_batch_column(b, c, &v), A2PACK_OK) << a2pack_last_error();
  return v;
}

std::vector<int64_t> indices_of(const a2pack_feed_batch* b) {
  auto v = column(b, A2PACK_FEED_INDICES);
  const auto* p = static_cast<const int64_t*>(v.data);
  return std::vector<int64_t>(p, p + v.rows);
}

a2pack_feed_batch_info info_of(const a2pack_feed_batch* b) {
  a2pack_feed_batch_info i{};
  i.size = sizeof i;
  EXPECT_EQ(a2pack_feed_batch_get_info(b, &i), A2PACK_OK);
  return i;
}

// Every selected column of `b` against the dataset rows its indices name.
void expect_columns_match(const Fixture& fx, const a2pack_feed_batch* b, uint32_t columns,
                          a2pack_feed_dtype moves) {
  auto idx = indices_of(b);
  for (size_t i = 0; i < idx.size(); ++i) {
    const Row& r = fx.rows[idx[i]];
    if (columns >> A2PACK_FEED_EXPONENTS & 1) {
      auto v = column(b, A2PACK_FEED_EXPONENTS);
      ASSERT_EQ(v.width, 16u);
      for (int c = 0; c < 16; ++c)
        ASSERT_EQ(static_cast<const uint8_t*>(v.data)[16 * i + c], (r.board >> (60 - 4 * c)) & 0xF);
    }
    if (columns >> A2PACK_FEED_MOVES & 1) {
      auto v = column(b, A2PACK_FEED_MOVES);
      ASSERT_EQ(v.dtype, moves);
      int64_t m = moves == A2PACK_FEED_DTYPE_U8 ? static_cast<const uint8_t*>(v.data)[i]
                  : moves == A2PACK_FEED_DTYPE_I32 ? static_cast<const int32_t*>(v.data)[i]
                                                   : static_cast<const int64_t*>(v.data)[i];
      ASSERT_EQ(m, r.move);
    }
    if (columns >> A2PACK_FEED_LEGAL & 1) {
      auto v = column(b, A2PACK_FEED_LEGAL);
      for (int k = 0; k < 4; ++k)
        ASSERT_EQ(static_cast<const uint8_t*>(v.data)[4 * i + k], r.ev_legal >> k & 1);
    }
    if (columns >> A2PACK_FEED_EV_VALUES & 1) {
      auto v = column(b, A2PACK_FEED_EV_VALUES);
      ASSERT_EQ(std::memcmp(static_cast<const float*>(v.data) + 4 * i, r.ev, 16), 0);
    }
    if (columns >> A2PACK_FEED_BOARDS & 1)
      ASSERT_EQ(static_cast<const uint64_t*>(column(b, A2PACK_FEED_BOARDS).data)[i], r.board);
    if (columns >> A2PACK_FEED_RUN_IDS & 1)
      ASSERT_EQ(static_cast<const uint32_t*>(column(b, A2PACK_FEED_RUN_IDS).data)[i], r.run_id);
    if (columns >> A2PACK_FEED_STEP_INDICES & 1)
      ASSERT_EQ(static_cast<const uint16_t*>(column(b, A2PACK_FEED_STEP_INDICES).data)[i],
                r.step_index);
    if (columns >> A2PACK_FEED_LEGAL_MASK & 1)
      ASSERT_EQ(static_cast<const uint8_t*>(column(b, A2PACK_FEED_LEGAL_MASK).data)[i], r.ev_legal);
  }
}

// The sampler's batches for epochs [0, epochs), through the C sampler.
std::vector<std::vector<int64_t>> sampler_batches(const std::vector<int64_t>& sel, uint64_t seed,
                                                  size_t batch, bool drop_last, uint64_t epochs) {
  a2pack_dataset_sampler* s = nullptr;
  EXPECT_EQ(a2pack_dataset_sampler_open(sel.data(), sel.size(), seed, batch, drop_last, &s),
            A2PACK_OK);
  std::vector<std::vector<int64_t>> out;
  for (uint64_t e = 0; e < epochs; ++e) {
    EXPECT_EQ(a2pack_dataset_sampler_set_epoch(s, e), A2PACK_OK);
    for (size_t b = 0; b < a2pack_dataset_sampler_batch_count(s); ++b) {
      std::vector<int64_t> v(batch);
      size_t n = 0;
      EXPECT_EQ(a2pack_dataset_sampler_batch(s, b, v.data(), &n), A2PACK_OK);
      v.resize(n);
      out.push_back(v);
    }
  }
  a2pack_dataset_sampler_close(s);
  return out;
}

// Everything the feed hands out until its end, as index lists.
std::vector<std::vector<int64_t>> drain(a2pack_feed* f) {
  std::vector<std::vector<int64_t>> out;
  for (;;) {
    a2pack_feed_batch* b = nullptr;
    EXPECT_EQ(a2pack_feed_next(f, &b), A2PACK_OK) << a2pack_last_error();
    if (!b) break;
    out.push_back(indices_of(b));
    a2pack_feed_batch_release(b);
  }
  return out;
}

std::vector<int64_t> every_third(uint64_t n) {
  std::vector<int64_t> sel;
  for (uint64_t i = 0; i < n; i += 3) sel.push_back(static_cast<int64_t>(i));
  return sel;
}

}  // namespace

TEST(CapiFeed, OrderIsTheSamplersForAnyThreadsAndDepth) {
  Fixture fx;
  auto sel = every_third(fx.n);  // 970 rows: 10 batches of 97 per epoch
  auto want = sampler_batches(sel, 7, 97, false, 3);
  for (uint32_t threads = 1; threads <= 8; ++threads) {
    for (uint32_t depth : {0u, 1u, 3u, 8u}) {
      auto o = opts(97, depth, threads, 7);
      o.epochs = 3;
      a2pack_feed* f = nullptr;
      ASSERT_EQ(a2pack_feed_open(fx.ds, sel.data(), sel.size(), &o, &f), A2PACK_OK)
          << a2pack_last_error();
      EXPECT_EQ(drain(f), want) << threads << " threads, depth " << depth;
      a2pack_feed_stats st{};
      st.size = sizeof st;
      ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
      EXPECT_EQ(st.batches_served, want.size());
      EXPECT_EQ(st.rows_served, 3 * sel.size());
      EXPECT_EQ(st.epoch, 3u);
      EXPECT_EQ(st.held, 0u);
      a2pack_feed_close(f);
    }
  }
}

TEST(CapiFeed, EveryColumnIsTheRowsItNames) {
  Fixture fx;
  for (a2pack_feed_dtype moves : {A2PACK_FEED_DTYPE_U8, A2PACK_FEED_DTYPE_I32, A2PACK_FEED_DTYPE_I64}) {
    auto o = opts(128, 2, 2, 3);
    o.columns = (1u << A2PACK_FEED_COLUMN_COUNT) - 1;
    o.moves_dtype = moves;
    o.epochs = 1;
    a2pack_feed* f = nullptr;
    ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK) << a2pack_last_error();
    uint64_t rows = 0;
    for (a2pack_feed_batch* b = nullptr; a2pack_feed_next(f, &b) == A2PACK_OK && b;) {
      expect_columns_match(fx, b, o.columns, moves);
      auto v = column(b, A2PACK_FEED_EV_VALUES);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % 64, 0u);
      EXPECT_EQ(v.nbytes, v.rows * 16);
      rows += info_of(b).rows;
      a2pack_feed_batch_release(b);
    }
    EXPECT_EQ(rows, fx.n);
    a2pack_feed_close(f);
  }
  // A column left out of the selection is not there.
  auto o = opts(64, 1, 1, 0);
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK);
  a2pack_feed_batch* b = nullptr;
  ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK);
  a2pack_feed_column_view v{};
  v.size = sizeof v;
  EXPECT_EQ(a2pack_feed_batch_column(b, A2PACK_FEED_BOARDS, &v), A2PACK_E_NOT_FOUND);
  EXPECT_EQ(a2pack_feed_batch_column(b, static_cast<a2pack_feed_column>(42), &v),
            A2PACK_E_INVALID_ARGUMENT);
  a2pack_feed_batch_release(b);
  a2pack_feed_close(f);
}

TEST(CapiFeed, RanksTakeContiguousPartsOfEachGlobalBatch) {
  Fixture fx;
  auto sel = every_third(fx.n);
  auto want = sampler_batches(sel, 11, 100, false, 2);
  std::vector<std::vector<std::vector<int64_t>>> parts;
  for (uint32_t rank = 0; rank < 3; ++rank) {
    auto o = opts(100, 2, 2, 11);
    o.rank = rank;
    o.world = 3;
    o.epochs = 2;
    a2pack_feed* f = nullptr;
    ASSERT_EQ(a2pack_feed_open(fx.ds, sel.data(), sel.size(), &o, &f), A2PACK_OK);
    parts.push_back(drain(f));
    a2pack_feed_close(f);
  }
  ASSERT_EQ(parts[0].size(), want.size());
  for (size_t b = 0; b < want.size(); ++b) {
    std::vector<int64_t> joined;
    for (auto& p : parts) joined.insert(joined.end(), p[b].begin(), p[b].end());
    EXPECT_EQ(joined, want[b]) << "global batch " << b;
  }
}

TEST(CapiFeed, StateResumesWithTheNextBatchAlsoAcrossEpochs) {
  Fixture fx;
  auto sel = every_third(fx.n);  // 10 batches of 97 per epoch
  auto want = sampler_batches(sel, 5, 97, false, 3);
  for (size_t k : {0u, 3u, 9u, 10u, 14u}) {
    auto o = opts(97, 3, 2, 5);
    o.epochs = 3;
    a2pack_feed* f = nullptr;
    ASSERT_EQ(a2pack_feed_open(fx.ds, sel.data(), sel.size(), &o, &f), A2PACK_OK);
    for (size_t i = 0; i < k; ++i) {
      a2pack_feed_batch* b = nullptr;
      ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK);
      ASSERT_EQ(indices_of(b), want[i]);
      a2pack_feed_batch_release(b);
    }
    uint8_t* state = nullptr;
    size_t len = 0;
    ASSERT_EQ(a2pack_feed_state(f, &state, &len), A2PACK_OK);
    a2pack_feed_close(f);

    // Another thread count and depth, opened with another seed: the state's
    // position and seed win.
    auto o2 = opts(97, 1, 3, 999);
    o2.epochs = 3;
    ASSERT_EQ(a2pack_feed_open(fx.ds, sel.data(), sel.size(), &o2, &f), A2PACK_OK);
    a2pack_feed_batch* early = nullptr;  // a batch taken before the load stays valid
    ASSERT_EQ(a2pack_feed_next(f, &early), A2PACK_OK);
    auto early_idx = indices_of(early);
    ASSERT_EQ(a2pack_feed_load_state(f, state, len), A2PACK_OK) << a2pack_last_error();
    std::vector<std::vector<int64_t>> rest(want.begin() + static_cast<long>(k), want.end());
    EXPECT_EQ(drain(f), rest) << "resumed after " << k;
    EXPECT_EQ(indices_of(early), early_idx);
    a2pack_feed_batch_release(early);
    a2pack_feed_close(f);
    a2pack_free(state);
  }
}

TEST(CapiFeed, StateFromAnotherSelectionOrDamagedIsRefused) {
  Fixture fx;
  auto sel = every_third(fx.n);
  auto o = opts(97, 2, 1, 5);
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, sel.data(), sel.size(), &o, &f), A2PACK_OK);
  uint8_t* state = nullptr;
  size_t len = 0;
  ASSERT_EQ(a2pack_feed_state(f, &state, &len), A2PACK_OK);
  std::vector<uint8_t> bytes(state, state + len);
  a2pack_free(state);

  std::vector<uint8_t> bad = bytes;
  bad[len / 2] ^= 0x40;
  EXPECT_EQ(a2pack_feed_load_state(f, bad.data(), bad.size()), A2PACK_E_CORRUPT);
  EXPECT_NE(std::string(a2pack_last_error()).find("damaged"), std::string::npos);
  EXPECT_EQ(a2pack_feed_load_state(f, bytes.data(), 7), A2PACK_E_INVALID_ARGUMENT);
  bad = bytes;
  bad[4] = 9;  // version
  EXPECT_EQ(a2pack_feed_load_state(f, bad.data(), bad.size()), A2PACK_E_UNSUPPORTED);

  // Other rows, another batch size, no shuffle: refused by name.
  auto other = sel;
  other.pop_back();
  a2pack_feed* g = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, other.data(), other.size(), &o, &g), A2PACK_OK);
  EXPECT_EQ(a2pack_feed_load_state(g, bytes.data(), bytes.size()), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("another set of rows"), std::string::npos);
  a2pack_feed_close(g);
  auto o3 = opts(96, 2, 1, 5);
  ASSERT_EQ(a2pack_feed_open(fx.ds, sel.data(), sel.size(), &o3, &g), A2PACK_OK);
  EXPECT_EQ(a2pack_feed_load_state(g, bytes.data(), bytes.size()), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("batch size"), std::string::npos);
  a2pack_feed_close(g);
  auto o4 = opts(97, 2, 1, 5);
  o4.shuffle = 0;
  ASSERT_EQ(a2pack_feed_open(fx.ds, sel.data(), sel.size(), &o4, &g), A2PACK_OK);
  EXPECT_EQ(a2pack_feed_load_state(g, bytes.data(), bytes.size()), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("shuffle"), std::string::npos);
  a2pack_feed_close(g);
  // The refused loads changed nothing: the feed still starts at batch 0.
  auto want = sampler_batches(sel, 5, 97, false, 1);
  a2pack_feed_batch* b = nullptr;
  ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK);
  EXPECT_EQ(indices_of(b), want[0]);
  a2pack_feed_batch_release(b);
  a2pack_feed_close(f);

  // A state of another dataset (same selection, other rows): refused.
  Fixture other_ds(31, 97);
  ASSERT_EQ(a2pack_feed_open(other_ds.ds, sel.data(), sel.size(), &o, &g), A2PACK_OK);
  EXPECT_EQ(a2pack_feed_load_state(g, bytes.data(), bytes.size()), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("another dataset"), std::string::npos);
  a2pack_feed_close(g);
}

TEST(CapiFeed, UnshuffledFeedsSlicesOfTheSelectionInOrder) {
  Fixture fx;
  auto sel = every_third(fx.n);
  auto o = opts(100, 2, 3, 0);
  o.shuffle = 0;
  o.drop_last = 1;
  o.epochs = 2;
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, sel.data(), sel.size(), &o, &f), A2PACK_OK);
  auto got = drain(f);
  ASSERT_EQ(got.size(), 2 * (sel.size() / 100));
  for (size_t b = 0; b < got.size(); ++b) {
    size_t first = (b % (sel.size() / 100)) * 100;
    EXPECT_EQ(got[b], std::vector<int64_t>(sel.begin() + first, sel.begin() + first + 100));
  }
  a2pack_feed_close(f);
}

TEST(CapiFeed, HeldBatchesStayIntactAndProducersWait) {
  Fixture fx;
  auto o = opts(64, 2, 4, 1);
  o.slots = 4;
  o.columns |= 1u << A2PACK_FEED_BOARDS;
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK);
  std::vector<a2pack_feed_batch*> held;
  std::vector<std::vector<uint64_t>> copies;
  for (int i = 0; i < 4; ++i) {  // past the depth: every slot of the ring
    a2pack_feed_batch* b = nullptr;
    ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK) << a2pack_last_error();
    auto v = column(b, A2PACK_FEED_BOARDS);
    const auto* p = static_cast<const uint64_t*>(v.data);
    copies.emplace_back(p, p + v.rows);
    held.push_back(b);
  }
  // All slots are the consumer's: asking for more is an error, not a hang.
  a2pack_feed_batch* b = nullptr;
  EXPECT_EQ(a2pack_feed_next(f, &b), A2PACK_E_FULL);
  EXPECT_EQ(b, nullptr);
  EXPECT_NE(std::string(a2pack_last_error()).find("holds all 4 ring slots"), std::string::npos);
  a2pack_feed_stats st{};
  st.size = sizeof st;
  ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
  EXPECT_EQ(st.held, 4u);
  EXPECT_EQ(st.ready, 0u);
  // A retained batch needs two releases.
  a2pack_feed_batch_retain(held[0]);
  a2pack_feed_batch_release(held[0]);
  EXPECT_EQ(a2pack_feed_next(f, &b), A2PACK_E_FULL);
  a2pack_feed_batch_release(held[0]);
  // One slot back: the feed moves on, the other held batches untouched.
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK) << a2pack_last_error();
    expect_columns_match(fx, b, o.columns, A2PACK_FEED_DTYPE_U8);
    a2pack_feed_batch_release(b);
  }
  for (int i = 1; i < 4; ++i) {
    auto v = column(held[i], A2PACK_FEED_BOARDS);
    const auto* p = static_cast<const uint64_t*>(v.data);
    EXPECT_EQ(std::vector<uint64_t>(p, p + v.rows), copies[i]) << "held batch " << i;
    expect_columns_match(fx, held[i], o.columns, A2PACK_FEED_DTYPE_U8);
  }
  // Close with batches outstanding: they stay valid until released.
  a2pack_feed_close(f);
  for (int i = 1; i < 4; ++i) {
    auto v = column(held[i], A2PACK_FEED_BOARDS);
    const auto* p = static_cast<const uint64_t*>(v.data);
    EXPECT_EQ(std::vector<uint64_t>(p, p + v.rows), copies[i]);
    a2pack_feed_batch_release(held[i]);
  }
}

TEST(CapiFeed, CloseMidEpochStopsEverything) {
  Fixture fx;
  for (uint32_t threads : {1u, 4u, 8u}) {
    auto o = opts(32, 6, threads, 2);
    a2pack_feed* f = nullptr;
    ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK);
    a2pack_feed_batch* b = nullptr;
    ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK);
    a2pack_feed_batch_release(b);
    a2pack_feed_close(f);  // producers mid-epoch, slots ready: joined and freed (ASan checks)
  }
  a2pack_feed_close(nullptr);
  a2pack_feed_batch_release(nullptr);
}

TEST(CapiFeed, EndAndTimeouts) {
  Fixture fx(2, 10);
  auto o = opts(8, 2, 1, 0);
  o.epochs = 1;
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK);
  int got = 0;
  for (;;) {
    a2pack_feed_batch* b = nullptr;
    int32_t ended = -1;
    ASSERT_EQ(a2pack_feed_next_timeout(f, 50, &b, &ended), A2PACK_OK);
    if (ended) {
      EXPECT_EQ(b, nullptr);
      break;
    }
    if (b) {
      ++got;
      EXPECT_EQ(info_of(b).global_rows, got == 3 ? 4u : 8u);
      a2pack_feed_batch_release(b);
    }
  }
  EXPECT_EQ(got, 3);
  a2pack_feed_batch* b = nullptr;
  EXPECT_EQ(a2pack_feed_next(f, &b), A2PACK_OK);  // still the end
  EXPECT_EQ(b, nullptr);
  a2pack_feed_close(f);
}

TEST(CapiFeed, AdvanceReleasesTakesAndDescribesInOneCall) {
  // The bindings' per-batch call: the batches given back are released, the
  // next one is handed out with its place, and the order is next()'s.
  Fixture fx(3, 40);
  auto o = opts(16, 2, 1, 9);
  o.slots = 3;
  o.epochs = 1;
  a2pack_feed *f = nullptr, *g = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK) << a2pack_last_error();
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &g), A2PACK_OK) << a2pack_last_error();
  std::vector<a2pack_feed_batch*> held;
  uint64_t seen = 0;
  for (;;) {
    // Give back all but the newest, with a NULL entry among them (skipped).
    std::vector<a2pack_feed_batch*> back;
    while (held.size() > 1) {
      back.push_back(held.front());
      back.push_back(nullptr);
      held.erase(held.begin());
    }
    a2pack_feed_batch* b = nullptr;
    a2pack_feed_batch_info info{};
    info.size = sizeof info;
    int32_t ended = -1;
    ASSERT_EQ(a2pack_feed_advance(f, back.data(), back.size(), -1, &b, &info, &ended), A2PACK_OK)
        << a2pack_last_error();
    a2pack_feed_batch* want = nullptr;
    ASSERT_EQ(a2pack_feed_next(g, &want), A2PACK_OK);
    if (ended) {
      EXPECT_EQ(b, nullptr);
      EXPECT_EQ(want, nullptr);
      break;
    }
    ASSERT_NE(b, nullptr);
    ASSERT_NE(want, nullptr);
    const auto ref = info_of(b);
    EXPECT_EQ(info.size, sizeof info);
    EXPECT_EQ(info.epoch, ref.epoch);
    EXPECT_EQ(info.batch, seen);
    EXPECT_EQ(info.rows, ref.rows);
    EXPECT_EQ(info.sequence, ref.sequence);
    EXPECT_EQ(indices_of(b), indices_of(want));
    a2pack_feed_batch_release(want);
    held.push_back(b);
    ++seen;
  }
  EXPECT_EQ(seen, (fx.n + 15) / 16);
  // With 3 slots and depth 2 the loop above could only go on because the
  // releases happened: one batch is held now.
  a2pack_feed_stats st{};
  st.size = sizeof st;
  ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
  EXPECT_EQ(st.held, 1u);
  // The call that reports the end still takes the last batch back.
  a2pack_feed_batch* b = nullptr;
  int32_t ended = 0;
  EXPECT_EQ(a2pack_feed_advance(f, held.data(), held.size(), 0, &b, nullptr, &ended), A2PACK_OK);
  EXPECT_EQ(ended, 1);
  ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
  EXPECT_EQ(st.held, 0u);
  EXPECT_EQ(a2pack_feed_advance(nullptr, nullptr, 0, 0, &b, nullptr, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  a2pack_feed_close(f);
  a2pack_feed_close(g);
}

TEST(CapiFeed, ProducersSpareOnlyTheConsumersCpuAndOnlyWhenAsked) {
  a2pack_feed_options d;
  a2pack_feed_options_init(&d);
  EXPECT_EQ(d.spare_consumer_cpu, 1);
  Fixture fx(4, 200);
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  for (int spare : {0, 1}) {
    auto o = opts(8, 2, 1, 3);
    o.spare_consumer_cpu = spare;
    a2pack_feed* f = nullptr;
    ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK) << a2pack_last_error();
    // A slow consumer (a 2 ms "training step") that stays on one CPU.
    const int cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    for (int i = 0; i < 24; ++i) {
      a2pack_feed_batch* b = nullptr;
      ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK) << a2pack_last_error();
      ASSERT_NE(b, nullptr);
      a2pack_feed_batch_release(b);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_EQ(sched_setaffinity(0, sizeof mine, &mine), 0);
    a2pack_feed_stats st{};
    st.size = sizeof st;
    ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
    // Whether the producers were moved off by now depends on how soon a
    // loaded machine ran them (the decision itself is FeedPlacement's test):
    // here only that they never keep off another CPU, nor any when told not to.
    if (spare && CPU_COUNT(&mine) > 1) EXPECT_TRUE(st.spared_cpu == cpu || st.spared_cpu == -1);
    else EXPECT_EQ(st.spared_cpu, -1);
    a2pack_feed_close(f);
  }
}

TEST(CapiFeed, BadOptionsAreRefusedByName) {
  Fixture fx;
  a2pack_feed* f = nullptr;
  auto o = opts(64, 2, 1, 0);
  o.rank = 2;
  o.world = 2;
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(f, nullptr);
  o = opts(64, 4, 1, 0);
  o.slots = 4;
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("depth + 1"), std::string::npos);
  o = opts(0, 2, 1, 0);
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_INVALID_ARGUMENT);
  o = opts(64, 2, 1, 0);
  o.moves_dtype = A2PACK_FEED_DTYPE_F32;
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_INVALID_ARGUMENT);
  o = opts(64, 2, 1, 0);
  o.columns = 1u << 20;
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_INVALID_ARGUMENT);
  o = opts(64, 2, 1, 0);
  std::memset(&o.pin, 0x7f, sizeof o.pin);
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_INVALID_ARGUMENT);
  o = opts(64, 2, 1, 0);
  std::vector<int64_t> sel = {0, 5, static_cast<int64_t>(fx.n)};
  EXPECT_EQ(a2pack_feed_open(fx.ds, sel.data(), sel.size(), &o, &f), A2PACK_E_OUT_OF_RANGE);
  EXPECT_NE(std::string(a2pack_last_error()).find("position 2"), std::string::npos);
  EXPECT_EQ(a2pack_feed_open(fx.ds, sel.data(), 0, &o, &f), A2PACK_E_INVALID_ARGUMENT);
  o = opts(fx.n + 1, 2, 1, 0);
  o.drop_last = 1;
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_feed_open(nullptr, nullptr, 0, nullptr, &f), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(f, nullptr);
}

TEST(CapiFeed, ForkedChildGetsAClearErrorAndTheParentGoesOn) {
  Fixture fx;
  auto o = opts(64, 4, 3, 9);
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK);
  a2pack_feed_batch* held = nullptr;
  ASSERT_EQ(a2pack_feed_next(f, &held), A2PACK_OK);
  auto held_idx = indices_of(held);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: next fails with CLOSED, the held batch is readable, and
    // release and close return (nothing waits for the parent's threads).
    a2pack_feed_batch* b = nullptr;
    int code = 0;
    if (a2pack_feed_next(f, &b) != A2PACK_E_CLOSED) code |= 1;
    if (std::string(a2pack_last_error()).find("forked") == std::string::npos) code |= 2;
    if (indices_of(held) != held_idx) code |= 4;
    a2pack_feed_batch_release(held);
    a2pack_feed_close(f);
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  a2pack_feed_batch_release(held);
  for (int i = 0; i < 10; ++i) {
    a2pack_feed_batch* b = nullptr;
    ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK);
    a2pack_feed_batch_release(b);
  }
  a2pack_feed_close(f);
}

namespace {
struct EnvVar {
  std::string name;
  EnvVar(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~EnvVar() { unsetenv(name.c_str()); }
};
}  // namespace

TEST(CapiFeed, WithoutCudaTheRingIsPlainMemory) {
  Fixture fx;
  unsetenv("A2PACK_CUDART");
  auto o = opts(64, 2, 1, 0);
  o.pin = A2PACK_FEED_PIN_AUTO;
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK);
  a2pack_feed_stats st{};
  st.size = sizeof st;
  ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
  EXPECT_EQ(st.pinned, 0);  // no libcudart is loaded in this test process
  a2pack_feed_batch* b = nullptr;
  ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK);
  EXPECT_EQ(column(b, A2PACK_FEED_MOVES).pinned, 0);
  a2pack_feed_batch_release(b);
  a2pack_feed_close(f);
  // Insisting without a runtime fails, naming what was tried.
  EnvVar env("A2PACK_CUDART", "/nonexistent/libcudart.so.12");
  o.pin = A2PACK_FEED_PIN_ON;
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_UNSUPPORTED);
  EXPECT_NE(std::string(a2pack_last_error()).find("/nonexistent/libcudart.so.12"),
            std::string::npos);
  o.pin = A2PACK_FEED_PIN_AUTO;  // auto: plain memory instead
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK);
  a2pack_feed_close(f);
}

TEST(CapiFeed, PinsTheRingThroughTheRuntimeItFinds) {
  Fixture fx;
  EnvVar env("A2PACK_CUDART", A2PACK_FAKE_CUDART);
  void* h = dlopen(A2PACK_FAKE_CUDART, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto* registers = static_cast<int*>(dlsym(h, "fake_cudart_registers"));
  auto* unregisters = static_cast<int*>(dlsym(h, "fake_cudart_unregisters"));
  auto* last_ptr = static_cast<void**>(dlsym(h, "fake_cudart_last_ptr"));
  auto* last_size = static_cast<size_t*>(dlsym(h, "fake_cudart_last_size"));
  auto* last_unreg = static_cast<void**>(dlsym(h, "fake_cudart_last_unregistered"));
  ASSERT_TRUE(registers && unregisters && last_ptr && last_size && last_unreg);
  const int r0 = *registers, u0 = *unregisters;

  auto o = opts(64, 2, 2, 0);
  o.pin = A2PACK_FEED_PIN_ON;
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK) << a2pack_last_error();
  EXPECT_EQ(*registers, r0 + 1);  // the whole ring in one call
  a2pack_feed_stats st{};
  st.size = sizeof st;
  ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
  EXPECT_EQ(st.pinned, 1);
  EXPECT_EQ(*last_size, st.slot_bytes * st.slots);
  a2pack_feed_batch* b = nullptr;
  ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK);
  auto v = column(b, A2PACK_FEED_EXPONENTS);
  EXPECT_EQ(v.pinned, 1);
  auto* base = static_cast<uint8_t*>(*last_ptr);
  EXPECT_GE(static_cast<uint8_t*>(v.data), base);
  EXPECT_LT(static_cast<uint8_t*>(v.data), base + *last_size);
  // Unregistered when the ring goes: after close and the last release.
  a2pack_feed_close(f);
  EXPECT_EQ(*unregisters, u0);
  a2pack_feed_batch_release(b);
  EXPECT_EQ(*unregisters, u0 + 1);
  EXPECT_EQ(*last_unreg, static_cast<void*>(base));

  // A runtime that refuses (no device): auto falls back, on fails by name.
  EnvVar fail_env("FAKE_CUDART_FAIL", "1");
  o.pin = A2PACK_FEED_PIN_AUTO;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK);
  ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
  EXPECT_EQ(st.pinned, 0);
  a2pack_feed_close(f);
  o.pin = A2PACK_FEED_PIN_ON;
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_UNSUPPORTED);
  EXPECT_NE(std::string(a2pack_last_error()).find("no CUDA-capable device"), std::string::npos);
  EXPECT_EQ(*unregisters, u0 + 1);
  dlclose(h);
}

TEST(CapiFeed, PutBackHandsTheBatchOutAgainAndReleaseCellsReleasesOnce) {
  Fixture fx(4, 50);
  a2pack_feed_options o = opts(16, 2, 1, 3);
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK) << a2pack_last_error();
  a2pack_feed_batch *a = nullptr, *b = nullptr;
  ASSERT_EQ(a2pack_feed_next(f, &a), A2PACK_OK);
  ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK);
  const auto want = indices_of(b);
  a2pack_feed_batch* none = nullptr;
  EXPECT_EQ(a2pack_feed_put_back(f, &none), A2PACK_OK);  // nothing to do
  a2pack_feed_batch* old = a;
  EXPECT_EQ(a2pack_feed_put_back(f, &old), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(old, a);  // unchanged
  a2pack_feed_batch* cell = b;
  ASSERT_EQ(a2pack_feed_put_back(f, &cell), A2PACK_OK);
  EXPECT_EQ(cell, nullptr);
  a2pack_feed_stats st{};
  st.size = sizeof st;
  ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
  EXPECT_EQ(st.next_batch, 1u);
  EXPECT_EQ(st.held, 1u);
  ASSERT_EQ(a2pack_feed_next(f, &cell), A2PACK_OK);
  EXPECT_EQ(cell, b);
  EXPECT_EQ(indices_of(cell), want);
  // Cells: each released once, however often it is named; empty ones skipped.
  a2pack_feed_batch* empty = nullptr;
  a2pack_feed_batch** cells[] = {&a, nullptr, &cell, &a, &empty};
  a2pack_feed_batch_release_cells(cells, 5);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(cell, nullptr);
  a2pack_feed_batch_release_cells(cells, 5);
  a2pack_feed_batch_release_cells(nullptr, 3);
  ASSERT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
  EXPECT_EQ(st.held, 0u);
  EXPECT_EQ(a2pack_feed_put_back(nullptr, &cell), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_feed_put_back(f, nullptr), A2PACK_E_INVALID_ARGUMENT);
  a2pack_feed_close(f);
}

TEST(CapiFeed, ApiTableListsTheFeed) {
  const a2pack_api_table* api = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(api, nullptr);
  ASSERT_NE(api->feed, nullptr);
  EXPECT_EQ(api->feed->size, sizeof(a2pack_feed_api));
  EXPECT_EQ(api->feed->open, &a2pack_feed_open);
  EXPECT_EQ(api->feed->next_timeout, &a2pack_feed_next_timeout);
  EXPECT_EQ(api->feed->batch_column, &a2pack_feed_batch_column);
  EXPECT_EQ(api->feed->stats_get, &a2pack_feed_stats_get);
  EXPECT_EQ(api->feed->load_state, &a2pack_feed_load_state);
  EXPECT_EQ(api->feed->advance, &a2pack_feed_advance);
  EXPECT_EQ(api->feed->put_back, &a2pack_feed_put_back);
  EXPECT_EQ(api->feed->batch_release_cells, &a2pack_feed_batch_release_cells);
}

TEST(CapiFeed, TheDefaultIndexShuffleServesEveryRowOnceAnEpoch) {
  a2pack_feed_options d;
  a2pack_feed_options_init(&d);
  EXPECT_EQ(d.shuffle, A2PACK_FEED_SHUFFLE_INDEX);
  Fixture fx;
  auto o = opts(97, 2, 2, 3);
  o.shuffle = A2PACK_FEED_SHUFFLE_INDEX;
  o.epochs = 2;
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK) << a2pack_last_error();
  std::vector<std::vector<int64_t>> epochs(2);
  for (;;) {
    a2pack_feed_batch* b = nullptr;
    ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK) << a2pack_last_error();
    if (!b) break;
    a2pack_feed_batch_info info{};
    info.size = sizeof info;
    ASSERT_EQ(a2pack_feed_batch_info_get(b, &info), A2PACK_OK);
    const auto v = column(b, A2PACK_FEED_INDICES);
    const auto* p = static_cast<const int64_t*>(v.data);
    epochs[info.epoch].insert(epochs[info.epoch].end(), p, p + info.rows);
    a2pack_feed_batch_release(b);
  }
  a2pack_feed_close(f);
  std::vector<int64_t> all(fx.n);
  for (uint64_t i = 0; i < fx.n; ++i) all[i] = static_cast<int64_t>(i);
  EXPECT_NE(epochs[0], epochs[1]);  // reshuffled
  for (auto& e : epochs) {
    std::sort(e.begin(), e.end());
    EXPECT_EQ(e, all);
  }
  o.shuffle = 3;
  EXPECT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("shuffle 3"), std::string::npos);
}

namespace {

uint32_t held_slots(a2pack_feed* f) {
  a2pack_feed_stats st{};
  st.size = sizeof st;
  EXPECT_EQ(a2pack_feed_stats_get(f, &st), A2PACK_OK);
  return st.held;
}

}  // namespace

TEST(CapiFeed, DlpackColumnsViewTheSlotAndKeepItUntilTheirDeleters) {
  Fixture fx;
  auto o = opts(64, 2, 1, 5);
  o.slots = 4;
  o.columns |= 1u << A2PACK_FEED_BOARDS;
  o.moves_dtype = A2PACK_FEED_DTYPE_I64;
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open(fx.ds, nullptr, 0, &o, &f), A2PACK_OK) << a2pack_last_error();
  a2pack_feed_batch* b = nullptr;
  ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK) << a2pack_last_error();
  const a2pack_feed_column cols[] = {A2PACK_FEED_EXPONENTS, A2PACK_FEED_MOVES, A2PACK_FEED_LEGAL,
                                     A2PACK_FEED_EV_VALUES, A2PACK_FEED_BOARDS,
                                     A2PACK_FEED_INDICES};
  constexpr size_t n = sizeof cols / sizeof cols[0];
  DLManagedTensorVersioned* t[n] = {};
  ASSERT_EQ(a2pack_feed_batch_dlpack(b, cols, n, t), A2PACK_OK) << a2pack_last_error();
  struct Want {
    uint8_t code, bits;
    int32_t ndim;
    int64_t width;
  };
  const Want want[n] = {{kDLUInt, 8, 2, 16}, {kDLInt, 64, 1, 0}, {kDLBool, 8, 2, 4},
                        {kDLFloat, 32, 2, 4}, {kDLUInt, 64, 1, 0}, {kDLInt, 64, 1, 0}};
  for (size_t i = 0; i < n; ++i) {
    const DLTensor& x = t[i]->dl_tensor;
    const auto v = column(b, cols[i]);
    EXPECT_EQ(t[i]->version.major, 1u);
    EXPECT_EQ(t[i]->flags, 0u);  // writable, not a copy
    EXPECT_EQ(x.data, v.data) << i;
    EXPECT_EQ(x.device.device_type, kDLCPU);
    EXPECT_EQ(x.dtype.code, want[i].code) << i;
    EXPECT_EQ(x.dtype.bits, want[i].bits) << i;
    EXPECT_EQ(x.dtype.lanes, 1);
    ASSERT_EQ(x.ndim, want[i].ndim) << i;
    EXPECT_EQ(x.shape[0], 64);
    if (x.ndim == 2) EXPECT_EQ(x.shape[1], want[i].width) << i;
    EXPECT_EQ(x.strides, nullptr);
    EXPECT_EQ(x.byte_offset, 0u);
  }
  // The boards through the tensor are the dataset's rows.
  const auto* idx = static_cast<const int64_t*>(t[5]->dl_tensor.data);
  const auto* boards = static_cast<const uint64_t*>(t[4]->dl_tensor.data);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(boards[i], fx.rows[idx[i]].board);
  // The caller's reference goes: the tensors keep the slot, every one of
  // them, until the last deleter.
  a2pack_feed_batch_release(b);
  EXPECT_EQ(held_slots(f), 1u);
  for (size_t i = 0; i + 1 < n; ++i) {
    t[i]->deleter(t[i]);
    EXPECT_EQ(held_slots(f), 1u) << "after " << i + 1 << " deleters";
  }
  // A tensor outlives its feed, its memory intact.
  const std::vector<int64_t> kept(idx, idx + 64);
  a2pack_feed_close(f);
  EXPECT_EQ(std::vector<int64_t>(idx, idx + 64), kept);
  t[n - 1]->deleter(t[n - 1]);
}

TEST(CapiFeed, DlpackIsAllOrNothingAndShapesWindowsAsUnitsOfSteps) {
  Fixture fx;
  auto o = opts(8, 2, 1, 5);
  o.shuffle = A2PACK_FEED_SHUFFLE_INDEX;
  a2pack_feed_replay_options ro;
  a2pack_feed_replay_options_init(&ro);
  ro.window = 5;
  o.columns |= 1u << A2PACK_FEED_STEP_INDICES;
  a2pack_feed* f = nullptr;
  ASSERT_EQ(a2pack_feed_open_replay(fx.ds, &ro, &o, &f), A2PACK_OK) << a2pack_last_error();
  a2pack_feed_batch* b = nullptr;
  ASSERT_EQ(a2pack_feed_next(f, &b), A2PACK_OK) << a2pack_last_error();
  // A column the feed does not have: nothing made, no reference taken.
  const a2pack_feed_column bad[] = {A2PACK_FEED_EXPONENTS, A2PACK_FEED_RUN_IDS};
  DLManagedTensorVersioned* t[2] = {};
  EXPECT_EQ(a2pack_feed_batch_dlpack(b, bad, 2, t), A2PACK_E_NOT_FOUND);
  EXPECT_EQ(t[0], nullptr);
  EXPECT_EQ(t[1], nullptr);
  EXPECT_EQ(a2pack_feed_batch_dlpack(nullptr, bad, 1, t), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_feed_batch_dlpack(b, nullptr, 1, t), A2PACK_E_INVALID_ARGUMENT);
  // Windows: [units, steps, ...], each window consecutive steps of one run.
  const a2pack_feed_column cols[] = {A2PACK_FEED_EXPONENTS, A2PACK_FEED_STEP_INDICES};
  ASSERT_EQ(a2pack_feed_batch_dlpack(b, cols, 2, t), A2PACK_OK) << a2pack_last_error();
  a2pack_feed_batch_release(b);
  EXPECT_EQ(held_slots(f), 1u);
  ASSERT_EQ(t[0]->dl_tensor.ndim, 3);
  EXPECT_EQ(t[0]->dl_tensor.shape[0], 8);
  EXPECT_EQ(t[0]->dl_tensor.shape[1], 5);
  EXPECT_EQ(t[0]->dl_tensor.shape[2], 16);
  ASSERT_EQ(t[1]->dl_tensor.ndim, 2);
  const auto* steps = static_cast<const uint16_t*>(t[1]->dl_tensor.data);
  for (int w = 0; w < 8; ++w)
    for (int s = 1; s < 5; ++s) EXPECT_EQ(steps[w * 5 + s], steps[w * 5] + s) << w;
  t[0]->deleter(t[0]);
  t[1]->deleter(t[1]);
  EXPECT_EQ(held_slots(f), 0u);
  a2pack_feed_close(f);
}
