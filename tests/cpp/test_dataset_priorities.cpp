// Prioritized replay's priorities (order/priorities.hpp): draws follow
// p^alpha within a bound computed from the number of draws, rows of
// priority 0 and rows outside the range are never drawn, importance weights
// match their formula, draws are deterministic, refused updates change
// nothing, updates and draws from several threads see whole updates, and
// the .npy file round-trips and is refused when it is another dataset's or
// damaged. (Named test_dataset_*: the orders are built with the dataset.)
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "order/priorities.hpp"
#include "test_util.hpp"

using a2pack::order::Priorities;
using a2test::status_of;

namespace {

std::vector<float> all_priorities(const Priorities& p) {
  std::vector<int64_t> idx(p.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  std::vector<float> out(idx.size());
  p.get(idx.data(), idx.size(), out.data());
  return out;
}

void set_all(Priorities& p, const std::vector<float>& values) {
  std::vector<int64_t> idx(values.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  p.update(idx.data(), values.data(), values.size());
}

// Draw `batches` batches of k rows of [lo, hi) (seeds fixed) and check each
// row's count against its probability p^alpha / sum: within 6 standard
// deviations of a binomial of that many draws (stratified draws vary less
// than independent ones, so the bound holds for them too), rows without
// mass never, rows outside the range never.
void expect_frequencies(const Priorities& p, uint64_t lo, uint64_t hi, size_t k, size_t batches,
                        double alpha) {
  const std::vector<float> v = all_priorities(p);
  std::vector<double> mass(hi - lo);
  double sum = 0;
  for (uint64_t i = lo; i < hi; ++i) {
    mass[i - lo] = v[i] > 0 ? std::pow(static_cast<double>(v[i]), alpha) : 0.0;
    sum += mass[i - lo];
  }
  std::vector<uint64_t> count(hi - lo, 0);
  std::vector<int64_t> out(k);
  for (size_t b = 0; b < batches; ++b) {
    p.sample(lo, hi, k, /*seed=*/12345, /*stream=*/b, out.data(), nullptr);
    for (int64_t r : out) {
      ASSERT_GE(r, static_cast<int64_t>(lo));
      ASSERT_LT(r, static_cast<int64_t>(hi));
      ++count[static_cast<size_t>(r) - lo];
    }
  }
  const double draws = static_cast<double>(k * batches);
  for (uint64_t i = 0; i < hi - lo; ++i) {
    const double prob = mass[i] / sum;
    if (mass[i] == 0) {
      EXPECT_EQ(count[i], 0u) << "row " << lo + i << " has priority 0";
      continue;
    }
    const double expected = draws * prob;
    const double bound = 6 * std::sqrt(draws * prob * (1 - prob)) + 1;
    EXPECT_NEAR(static_cast<double>(count[i]), expected, bound) << "row " << lo + i;
  }
}

}  // namespace

TEST(Priorities, RefusesBadParametersNamingTheValue) {
  std::string msg;
  EXPECT_EQ(status_of([] { Priorities(0, 1, 1, 1); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("n must be"), std::string::npos) << msg;
  EXPECT_EQ(status_of([] { Priorities(4, -0.5, 1, 1); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("alpha -0.5"), std::string::npos) << msg;
  EXPECT_EQ(status_of([] { Priorities(4, NAN, 1, 1); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("alpha nan"), std::string::npos) << msg;
  EXPECT_EQ(status_of([] { Priorities(4, INFINITY, 1, 1); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("alpha inf"), std::string::npos) << msg;
  EXPECT_EQ(status_of([] { Priorities(4, 1, -2, 1); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("beta -2"), std::string::npos) << msg;
  EXPECT_EQ(status_of([] { Priorities(4, 1, NAN, 1); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("beta nan"), std::string::npos) << msg;
  EXPECT_EQ(status_of([] { Priorities(4, 1, 1, -1.0f); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("-1"), std::string::npos) << msg;
  EXPECT_EQ(status_of([] { Priorities(4, 1, 1, NAN); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("nan"), std::string::npos) << msg;
  EXPECT_EQ(status_of([] { Priorities(4, 1, 1, INFINITY); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("inf"), std::string::npos) << msg;
  // A priority whose p^alpha a float cannot hold would make the sums infinite.
  EXPECT_EQ(status_of([] { Priorities(4, 3, 1, 1e20f); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("1e+20"), std::string::npos) << msg;
}

TEST(Priorities, Accessors) {
  Priorities p(100, 0.5, 0.4, 4.0f);
  EXPECT_EQ(p.size(), 100u);
  EXPECT_EQ(p.alpha(), 0.5);
  EXPECT_EQ(p.beta(), 0.4);
  EXPECT_DOUBLE_EQ(p.total(), 100 * 2.0);
  const int64_t idx[] = {0, 99};
  float got[2];
  p.get(idx, 2, got);
  EXPECT_EQ(got[0], 4.0f);
  EXPECT_EQ(got[1], 4.0f);
  const int64_t bad[] = {0, 100};
  std::string msg;
  EXPECT_EQ(status_of([&] { p.get(bad, 2, got); }, &msg), A2PACK_E_OUT_OF_RANGE);
  EXPECT_NE(msg.find("index 100 (position 1)"), std::string::npos) << msg;
}

// The values (4 bytes a row) and a sum tree of doubles over blocks of 8 rows
// (8 bytes a block and a seventh of that above): 5.14 bytes a row at any
// large n; grown (a live dataset's appends) the values and the blocks keep
// room for a quarter more, 6.5 at most.
TEST(Priorities, HoldAboutFiveBytesARowAndAtMostSixAndAHalfGrown) {
  for (uint64_t n : {uint64_t{1} << 20, uint64_t{8} * ((uint64_t{1} << 20) + 1), uint64_t{3'000'001}}) {
    Priorities p(n, 0.6, 0.4, 1.0f);
    const double per_row = static_cast<double>(p.bytes()) / static_cast<double>(n);
    EXPECT_GE(per_row, 5.1) << n << " rows";
    EXPECT_LE(per_row, 5.2) << n << " rows";
    p.grow(n + n / 2, 1.0f);
    EXPECT_LE(static_cast<double>(p.bytes()) / static_cast<double>(n + n / 2), 6.5) << n << " rows grown";
    for (uint64_t more = 1; more <= 64; ++more) p.grow(n + n / 2 + more * 1000, 1.0f);  // appends
    EXPECT_LE(static_cast<double>(p.bytes()) / static_cast<double>(n + n / 2 + 64000), 6.5) << n;
  }
  Priorities small(3, 0.6, 0.4, 1.0f);  // a few rows: the tree's least
  EXPECT_LE(small.bytes(), 1024u);
}

TEST(Priorities, FrequenciesFollowPriorityToTheAlpha) {
  for (double alpha : {1.0, 0.6, 0.5, 2.0}) {
    SCOPED_TRACE(alpha);
    Priorities p(50, alpha, 0.4, 1.0f);
    std::vector<float> v(50);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7);  // some 0
    set_all(p, v);
    expect_frequencies(p, 0, 50, 64, 2000, alpha);
  }
}

TEST(Priorities, AlphaZeroIsUniformOverRowsWithPriority) {
  Priorities p(40, 0.0, 0.4, 1.0f);
  std::vector<float> v(40, 3.0f);
  for (size_t i = 0; i < v.size(); i += 3) v[i] = 0;
  set_all(p, v);
  EXPECT_DOUBLE_EQ(p.total(), 40.0 - 14.0);
  expect_frequencies(p, 0, 40, 32, 2000, 0.0);
}

// Row counts that fill the tree's blocks exactly (a power of two of them),
// with the range ending at the last row.
TEST(Priorities, FrequenciesWhenTheRowsFillTheTree) {
  for (uint64_t n : {1, 15, 16, 32, 64, 1024, 1040}) {
    SCOPED_TRACE(n);
    Priorities p(n, 1.0, 0.4, 1.0f);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(1 + i % 5);
    set_all(p, v);
    expect_frequencies(p, 0, n, 256, n <= 64 ? 200 : 2000, 1.0);
    expect_frequencies(p, n / 2, n, 64, 200, 1.0);
  }
}

TEST(Priorities, RangesDrawOnlyTheirRowsInProportion) {
  Priorities p(1000, 0.7, 0.4, 1.0f);
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 11);
  set_all(p, v);
  // Ranges starting and ending inside blocks, a row's own range, the newest.
  const std::pair<uint64_t, uint64_t> ranges[] = {
      {0, 1000}, {3, 29}, {17, 18}, {100, 612}, {999, 1000}, {900, 1000}, {1, 999}};
  for (auto [lo, hi] : ranges) {
    SCOPED_TRACE(testing::Message() << "[" << lo << ", " << hi << ")");
    bool any = false;
    for (uint64_t i = lo; i < hi; ++i) any |= v[i] > 0;
    if (!any) continue;
    expect_frequencies(p, lo, hi, 50, 400, 0.7);
  }
}

TEST(Priorities, RowsWithoutPriorityAreNeverDrawn) {
  // Mass on a few rows at the edges of blocks and of the ranges, tiny beside
  // huge, so that rounding in the sums would land next to them.
  const uint64_t n = 4096 + 7;
  Priorities p(n, 1.0, 1.0, 0.0f);
  const int64_t idx[] = {0, 15, 16, 31, 2047, 2048, 4095, 4102};
  const float val[] = {1e-30f, 1e30f, 1e-30f, 1.0f, 1e-20f, 1e20f, 1e-30f, 3.0f};
  p.update(idx, val, 8);
  std::vector<float> v = all_priorities(p);
  std::vector<int64_t> out(4096);
  const std::pair<uint64_t, uint64_t> ranges[] = {
      {0, n}, {1, n}, {0, 16}, {15, 17}, {16, 2048}, {17, 2048}, {2047, 2049}, {4095, n}, {2049, n}};
  for (auto [lo, hi] : ranges) {
    for (uint64_t s = 0; s < 20; ++s) {
      p.sample(lo, hi, out.size(), s, s * 7, out.data(), nullptr);
      for (int64_t r : out) {
        ASSERT_GE(r, static_cast<int64_t>(lo));
        ASSERT_LT(r, static_cast<int64_t>(hi));
        ASSERT_GT(v[static_cast<size_t>(r)], 0.0f) << "row " << r << " in [" << lo << ", " << hi << ")";
      }
    }
  }
  // No draws, or no weights asked for.
  p.sample(0, n, 0, 1, 1, nullptr, nullptr);
  // A range whose rows are all 0 is refused, saying so.
  std::string msg;
  EXPECT_EQ(status_of([&] { p.sample(1, 15, 4, 0, 0, out.data(), nullptr); }, &msg),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("[1, 15) is 0"), std::string::npos) << msg;
  // As is a range outside the rows, or empty.
  EXPECT_EQ(status_of([&] { p.sample(0, n + 1, 4, 0, 0, out.data(), nullptr); }),
            A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(status_of([&] { p.sample(5, 5, 4, 0, 0, out.data(), nullptr); }), A2PACK_E_OUT_OF_RANGE);
}

TEST(Priorities, WeightsAreTheirFormulaNormalisedByTheLargest) {
  const double alpha = 0.6, beta = 0.4;
  Priorities p(300, alpha, beta, 1.0f);
  std::vector<float> v(300);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f + static_cast<float>((i * 13) % 17);
  set_all(p, v);
  for (auto [lo, hi] : {std::pair<uint64_t, uint64_t>{0, 300}, {120, 250}}) {
    double sum = 0;
    for (uint64_t i = lo; i < hi; ++i) sum += std::pow(static_cast<double>(v[i]), alpha);
    const double N = static_cast<double>(hi - lo);
    std::vector<int64_t> out(64);
    std::vector<float> w(64);
    p.sample(lo, hi, out.size(), 7, 1, out.data(), w.data());
    std::vector<double> direct(out.size());
    double wmax = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double P = std::pow(static_cast<double>(v[static_cast<size_t>(out[i])]), alpha) / sum;
      direct[i] = std::pow(N * P, -beta);
      wmax = std::max(wmax, direct[i]);
    }
    float largest = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_NEAR(w[i], direct[i] / wmax, 1e-5) << "draw " << i;
      largest = std::max(largest, w[i]);
    }
    EXPECT_FLOAT_EQ(largest, 1.0f);
  }
  // A large beta over a wide range of priorities: the weights stay in (0, 1].
  Priorities steep(300, 1.0, 40.0, 1.0f);
  std::vector<float> wide(300);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = std::pow(10.0f, static_cast<float>(i % 20) - 10);
  set_all(steep, wide);
  {
    std::vector<int64_t> out(256);
    std::vector<float> w(256);
    steep.sample(0, 300, out.size(), 3, 3, out.data(), w.data());
    float largest = 0;
    for (float x : w) {
      EXPECT_GE(x, 0.0f);
      EXPECT_LE(x, 1.0f);
      largest = std::max(largest, x);
    }
    EXPECT_EQ(largest, 1.0f);
  }
  // beta 0: every weight 1.
  Priorities flat(300, alpha, 0.0, 1.0f);
  set_all(flat, v);
  std::vector<int64_t> out(32);
  std::vector<float> w(32);
  flat.sample(0, 300, 32, 1, 2, out.data(), w.data());
  for (float x : w) EXPECT_EQ(x, 1.0f);
}

TEST(Priorities, DrawsAreDeterministicInSeedStreamAndUpdates) {
  auto make = [] {
    Priorities p(5000, 0.6, 0.4, 1.0f);
    for (int step = 0; step < 50; ++step) {
      std::vector<int64_t> idx(100);
      std::vector<float> val(100);
      for (size_t i = 0; i < idx.size(); ++i) {
        idx[i] = static_cast<int64_t>((step * 977 + i * 31) % 5000);
        val[i] = static_cast<float>((step + i) % 9) * 0.25f;
      }
      p.update(idx.data(), val.data(), idx.size());
    }
    return p.total();
  };
  EXPECT_EQ(make(), make());
  Priorities a(5000, 0.6, 0.4, 1.0f), b(5000, 0.6, 0.4, 1.0f);
  std::vector<float> v(5000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 13);
  set_all(a, v);
  set_all(b, v);
  std::vector<int64_t> oa(256), ob(256);
  std::vector<float> wa(256), wb(256);
  a.sample(10, 4000, 256, 99, 3, oa.data(), wa.data());
  b.sample(10, 4000, 256, 99, 3, ob.data(), wb.data());
  EXPECT_EQ(oa, ob);
  EXPECT_EQ(wa, wb);
  a.sample(10, 4000, 256, 99, 3, ob.data(), wb.data());
  EXPECT_EQ(oa, ob);
  // Another stream or seed: other rows.
  b.sample(10, 4000, 256, 99, 4, ob.data(), wb.data());
  EXPECT_NE(oa, ob);
  b.sample(10, 4000, 256, 98, 3, ob.data(), wb.data());
  EXPECT_NE(oa, ob);
  // Stratified: draws ascend with their parts of the mass.
  for (size_t i = 1; i < oa.size(); ++i) EXPECT_LE(oa[i - 1], oa[i]);
}

TEST(Priorities, RefusedUpdatesChangeNothing) {
  Priorities p(64, 0.5, 0.4, 2.0f);
  const std::vector<float> before = all_priorities(p);
  const double total = p.total();
  std::string msg;
  {
    const int64_t idx[] = {1, 2, 64};
    const float val[] = {5, 6, 7};
    EXPECT_EQ(status_of([&] { p.update(idx, val, 3); }, &msg), A2PACK_E_OUT_OF_RANGE);
    EXPECT_NE(msg.find("index 64 (position 2)"), std::string::npos) << msg;
  }
  {
    const int64_t idx[] = {1, -1};
    const float val[] = {5, 6};
    EXPECT_EQ(status_of([&] { p.update(idx, val, 2); }, &msg), A2PACK_E_OUT_OF_RANGE);
    EXPECT_NE(msg.find("index -1 (position 1)"), std::string::npos) << msg;
  }
  for (float bad : {-1.0f, NAN, INFINITY, -INFINITY}) {
    const int64_t idx[] = {3, 4, 5};
    const float val[] = {5, 6, bad};
    EXPECT_EQ(status_of([&] { p.update(idx, val, 3); }, &msg), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_NE(msg.find("(position 2)"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fmt::format("value {}", bad)), std::string::npos) << msg;
  }
  EXPECT_EQ(all_priorities(p), before);
  EXPECT_EQ(p.total(), total);
}

TEST(Priorities, AValueWhosePowerABigAlphaTakesBeyondAFloatIsRefused) {
  Priorities p(8, 2.0, 0.4, 1.0f);
  const int64_t idx[] = {1, 2};
  const float val[] = {3.0f, 1e20f};  // (1e20)^2 is past the largest float
  std::string msg;
  EXPECT_EQ(status_of([&] { p.update(idx, val, 2); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("(position 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("beyond a float"), std::string::npos) << msg;
  EXPECT_EQ(all_priorities(p), std::vector<float>(8, 1.0f));
}

// Updates are left for the next reader; with none coming, an update applies
// what waits once it passes kMaxPending rows. Either way every read sees
// every update in the order given.
TEST(Priorities, UpdatesWithoutAReaderAreAppliedInOrderPastTheirBound) {
  const uint64_t n = 50000;
  Priorities p(n, 0.5, 0.4, 1.0f);
  std::vector<float> want(n, 1.0f);
  std::mt19937_64 rng(11);
  std::vector<int64_t> idx(4096);
  std::vector<float> val(idx.size());
  const size_t rounds = Priorities::kMaxPending / idx.size() * 2 + 3;
  for (size_t r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < idx.size(); ++i) {
      idx[i] = static_cast<int64_t>(rng() % n);
      val[i] = static_cast<float>(rng() % 1000) / 8.0f;
      want[static_cast<size_t>(idx[i])] = val[i];
    }
    p.update(idx.data(), val.data(), idx.size());
  }
  EXPECT_EQ(all_priorities(p), want);
  double total = 0;
  for (float v : want) total += std::sqrt(static_cast<double>(v));
  EXPECT_NEAR(p.total(), total, 1e-6 * total);
}

TEST(Priorities, ARowNamedTwiceTakesTheLast) {
  Priorities p(20, 1.0, 0.4, 1.0f);
  const int64_t idx[] = {3, 7, 3, 3};
  const float val[] = {5, 6, 0, 9};
  p.update(idx, val, 4);
  const int64_t q[] = {3, 7};
  float got[2];
  p.get(q, 2, got);
  EXPECT_EQ(got[0], 9.0f);
  EXPECT_EQ(got[1], 6.0f);
  EXPECT_DOUBLE_EQ(p.total(), 18 + 9 + 6);
}

TEST(Priorities, TotalStaysExactOverManyUpdates) {
  // The sums are recomputed from their children, not adjusted, so rounding
  // never accumulates.
  Priorities p(10000, 1.0, 0.4, 0.0f);
  std::vector<int64_t> idx(1000);
  std::vector<float> val(1000);
  for (int step = 0; step < 200; ++step) {
    for (size_t i = 0; i < idx.size(); ++i) {
      idx[i] = static_cast<int64_t>((step * 7919 + i * 104729) % 10000);
      val[i] = step % 2 ? 1e6f : 1e-3f;
    }
    p.update(idx.data(), val.data(), idx.size());
  }
  std::vector<float> zero(10000, 0.0f);
  set_all(p, zero);
  EXPECT_EQ(p.total(), 0.0);
  const int64_t one = 4242;
  const float v = 0.125f;
  p.update(&one, &v, 1);
  EXPECT_EQ(p.total(), 0.125);
  std::vector<int64_t> out(16);
  p.sample(0, 10000, 16, 1, 1, out.data(), nullptr);
  for (int64_t r : out) EXPECT_EQ(r, 4242);
}

TEST(Priorities, GrowAddsRowsOfTheGivenPriority) {
  Priorities p(30, 1.0, 0.4, 1.0f);
  const int64_t idx[] = {5};
  const float val[] = {4};
  p.update(idx, val, 1);
  p.grow(30, 9.0f);  // not larger: nothing
  EXPECT_EQ(p.size(), 30u);
  for (uint64_t n : {31, 32, 100, 1000, 1025}) {
    p.grow(n, 2.0f);
    EXPECT_EQ(p.size(), n);
  }
  std::vector<float> v = all_priorities(p);
  EXPECT_EQ(v[5], 4.0f);
  EXPECT_EQ(v[29], 1.0f);
  EXPECT_EQ(v[30], 2.0f);
  EXPECT_EQ(v[1024], 2.0f);
  EXPECT_DOUBLE_EQ(p.total(), 29 + 4 + 2.0 * (1025 - 30));
  expect_frequencies(p, 0, 1025, 128, 400, 1.0);
  expect_frequencies(p, 1000, 1025, 16, 400, 1.0);
  // Grown inside the tree (its last block, then new blocks) or doubling it:
  // the same sums as priorities made at that size.
  for (uint64_t n : {1030, 1040, 1100, 2048, 2049}) {
    p.grow(n, 0.5f);
    Priorities fresh(n, 1.0, 0.4, 0.0f);
    set_all(fresh, all_priorities(p));
    EXPECT_EQ(p.total(), fresh.total()) << n;
  }
  std::string msg;
  EXPECT_EQ(status_of([&] { p.grow(3000, -1.0f); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("initial priority -1"), std::string::npos) << msg;
  EXPECT_EQ(p.size(), 2049u);
}

TEST(Priorities, UpdatesAndDrawsFromSeveralThreadsSeeWholeUpdates) {
  // Two updaters set the mass either on even rows only or on odd rows only,
  // each in one update of every row: a batch drawn meanwhile is all even or
  // all odd, and the total is one of the two.
  const uint64_t n = 20000;
  Priorities p(n, 1.0, 0.4, 0.0f);
  std::vector<float> even(n), odd(n);
  for (uint64_t i = 0; i < n; ++i) {
    even[i] = i % 2 ? 0.0f : 1.0f;
    odd[i] = i % 2 ? 3.0f : 0.0f;
  }
  set_all(p, even);
  std::vector<int64_t> all(n);
  for (uint64_t i = 0; i < n; ++i) all[i] = static_cast<int64_t>(i);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> mixed{0}, batches{0}, bad_total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) p.update(all.data(), (i + t) % 2 ? odd.data() : even.data(), n);
    });
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<int64_t> out(512);
      std::vector<float> w(512);
      for (uint64_t s = 0; !stop.load(); ++s) {
        const uint64_t lo = (s * 131) % (n / 2);
        p.sample(lo, n, out.size(), static_cast<uint64_t>(t), s, out.data(), w.data());
        const int64_t parity = out[0] % 2;
        for (int64_t r : out)
          if (r % 2 != parity || r < static_cast<int64_t>(lo)) ++mixed;
        const double total = p.total();
        if (total != n / 2 * 1.0 && total != n / 2 * 3.0) ++bad_total;
        ++batches;
      }
    });
  threads[0].join();
  threads[1].join();
  stop = true;
  for (size_t i = 2; i < threads.size(); ++i) threads[i].join();
  EXPECT_GT(batches.load(), 0u);
  EXPECT_EQ(mixed.load(), 0u);
  EXPECT_EQ(bad_total.load(), 0u);
}

TEST(Priorities, AnUpdateDuringADrawReturnsAtOnceAndTheNextReadSeesIt) {
  // A draw holds the priorities (its accept callback runs under the lock
  // and waits); an update given meanwhile returns without waiting for it,
  // the draw keeps the priorities it began with, and every read after the
  // update sees it.
  const uint64_t n = 1000;
  Priorities p(n, 1.0, 0.4, 1.0f);
  std::promise<void> drawing, updated;
  std::future<void> go = updated.get_future();
  std::vector<int64_t> drawn(64);
  std::thread drawer([&] {
    bool first = true;
    p.sample_where(0, n, drawn.size(), 1, 0,
                   [&](uint64_t) {
                     if (first) {
                       first = false;
                       drawing.set_value();
                       go.wait();
                     }
                     return true;
                   },
                   0, drawn.data(), nullptr);
  });
  drawing.get_future().wait();
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> only7(n, 0.0f);
  only7[7] = 5.0f;
  auto update = std::async(std::launch::async, [&] { p.update(all.data(), only7.data(), n); });
  const bool returned = update.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  updated.set_value();
  drawer.join();
  update.get();
  EXPECT_TRUE(returned) << "the update waited for the draw under way";
  EXPECT_GT(std::count_if(drawn.begin(), drawn.end(), [](int64_t r) { return r != 7; }), 0)
      << "the draw under way saw the update";
  int64_t seven = 7;
  float got = 0;
  p.get(&seven, 1, &got);
  EXPECT_EQ(got, 5.0f);
  EXPECT_DOUBLE_EQ(p.total(), 5.0);
  std::vector<int64_t> out(16);
  p.sample(0, n, out.size(), 2, 0, out.data(), nullptr);
  for (int64_t r : out) EXPECT_EQ(r, 7);
}

TEST(Priorities, SaveLoadRoundTrip) {
  a2test::TempDir tmp;
  Priorities p(1000, 0.6, 0.4, 1.0f);
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 17) * 0.5f;
  set_all(p, v);
  const std::string path = tmp / "priorities.npy";
  p.save(path);
  p.save(path);  // over the last
  // Nothing left beside it.
  size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(tmp.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  auto q = Priorities::load(path, 0.6, 0.4, 1000);
  EXPECT_EQ(q->size(), 1000u);
  EXPECT_EQ(all_priorities(*q), v);
  EXPECT_EQ(q->total(), p.total());
  std::vector<int64_t> a(128), b(128);
  std::vector<float> wa(128), wb(128);
  p.sample(0, 1000, 128, 5, 6, a.data(), wa.data());
  q->sample(0, 1000, 128, 5, 6, b.data(), wb.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(wa, wb);
  // expected_n 0: any length; the caller's alpha applies.
  auto r = Priorities::load(path, 1.0, 0.0, 0);
  EXPECT_EQ(r->alpha(), 1.0);
  double sum = 0;
  for (float x : v) sum += x;
  EXPECT_DOUBLE_EQ(r->total(), sum);
}

TEST(Priorities, SavedFileIsNumpyFloat32Version1) {
  a2test::TempDir tmp;
  Priorities p(5, 1.0, 0.4, 0.0f);
  const int64_t idx[] = {0, 1, 2, 3, 4};
  const float val[] = {0.5f, 1, 2, 0, 1e-3f};
  p.update(idx, val, 5);
  const std::string path = tmp / "p.npy";
  p.save(path);
  const std::vector<uint8_t> bytes = a2test::read_bytes(path);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 6), "\x93NUMPY");
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[7], 0);
  const size_t header_len = bytes[8] | bytes[9] << 8;
  const size_t data = 10 + header_len;
  EXPECT_EQ(data % 64, 0u);  // numpy aligns the data to 64 bytes
  ASSERT_EQ(bytes.size(), data + 5 * sizeof(float));
  const std::string dict(bytes.begin() + 10, bytes.begin() + static_cast<ptrdiff_t>(data));
  EXPECT_EQ(dict.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 0), 0u) << dict;
  EXPECT_EQ(dict.back(), '\n');
  EXPECT_EQ(dict.find_first_not_of(' ', 58), dict.size() - 1);
  float got[5];
  std::memcpy(got, bytes.data() + data, sizeof got);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[i], val[i]);
  // (These are, byte for byte, the bytes numpy.save writes for this array.)
}

TEST(Priorities, LoadReadsNpyVersion2) {
  // numpy writes version 2.0 when a header outgrows 2 bytes of length.
  a2test::TempDir tmp;
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  dict.append((64 - (12 + dict.size() + 1) % 64) % 64, ' ');
  dict += '\n';
  std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((dict.size() >> (8 * i)) & 0xFF);
  bytes += dict;
  const float v[] = {0.25f, 0.0f, 4.0f};
  bytes.append(reinterpret_cast<const char*>(v), sizeof v);
  a2test::write_bytes(tmp / "v2.npy", bytes.data(), bytes.size());
  auto p = Priorities::load(tmp / "v2.npy", 0.5, 0.4, 3);
  EXPECT_EQ(all_priorities(*p), std::vector<float>(v, v + 3));
  EXPECT_DOUBLE_EQ(p->total(), 0.5 + 2.0);
}

TEST(Priorities, LoadRefusesAnotherDatasetsOrADamagedFile) {
  a2test::TempDir tmp;
  Priorities p(100, 1.0, 0.4, 1.0f);
  const std::string path = tmp / "p.npy";
  p.save(path);
  std::string msg;
  EXPECT_EQ(status_of([&] { Priorities::load(path, 1.0, 0.4, 101); }, &msg),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("100 priorities, for 101 rows"), std::string::npos) << msg;
  EXPECT_NE(msg.find("another dataset"), std::string::npos) << msg;

  const std::vector<uint8_t> good = a2test::read_bytes(path);
  const size_t data = 10 + (good[8] | good[9] << 8);
  auto refused = [&](std::vector<uint8_t> bytes, const char* what) {
    SCOPED_TRACE(what);
    const std::string bad = tmp / "bad.npy";
    a2test::write_bytes(bad, bytes.data(), bytes.size());
    std::string m;
    const a2pack_status s = status_of([&] { Priorities::load(bad, 1.0, 0.4, 0); }, &m);
    EXPECT_EQ(s, A2PACK_E_CORRUPT) << m;
    EXPECT_NE(m.find(bad), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  };
  auto with_dict = [&](const std::string& dict) {
    std::string d = dict;
    d.append((64 - (10 + d.size() + 1) % 64) % 64, ' ');
    d += '\n';
    const std::string h = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(d.size() & 0xFF) +
                          static_cast<char>(d.size() >> 8) + d;
    return std::vector<uint8_t>(h.begin(), h.end());
  };
  refused({}, "no NPY magic");
  refused({'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'}, "no NPY magic");
  {
    auto b = good;
    b[6] = 9;
    refused(b, "NPY version 9");
  }
  refused(std::vector<uint8_t>(good.begin(), good.begin() + 40), "truncated header");
  refused(std::vector<uint8_t>(good.begin(), good.end() - 1), "bytes of data for 100");
  {
    auto b = good;
    b.insert(b.end(), {0, 0, 0, 0});
    refused(b, "bytes of data for 100");
  }
  {
    auto b = with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (100,), }");
    b.resize(b.size() + 800);
    refused(b, "dtype");
  }
  {
    auto b = with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (10, 10), }");
    b.resize(b.size() + 400);
    refused(b, "shape");
  }
  {
    // A length whose bytes wrap around 64 bits must not pass for 4.
    auto b = with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387905,), }");
    b.resize(b.size() + 4);
    refused(b, "bytes of data");
  }
  {
    auto b = with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }");
    refused(b, "no priorities");
  }
  {
    auto b = good;
    const float nan = NAN;
    std::memcpy(b.data() + data + 4 * 37, &nan, 4);
    refused(b, "row 37");
  }
  EXPECT_EQ(status_of([&] { Priorities::load(tmp / "missing.npy", 1.0, 0.4, 0); }, &msg),
            A2PACK_E_NOT_FOUND)
      << msg;
  EXPECT_NE(msg.find("missing.npy"), std::string::npos) << msg;
}
