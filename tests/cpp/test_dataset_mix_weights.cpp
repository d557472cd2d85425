// The mixing sampler's weights at the edges of double: finite weights whose
// sum overflows (1e308 twice), ratios past the quantisation (1e308 against
// 1e-308), subnormal weights. Every entry point that takes weights (the
// constructor, set_weights, load_state of a mix and of a feed over one, a
// feed's set_weights) mixes them by their ratios alone; refused weights
// change nothing.
#include <gtest/gtest.h>

#include <cfloat>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/mix_sampler.hpp"
#include "feed/feed.hpp"
#include "test_built_dataset.hpp"
#include "test_dataset_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;

namespace {

constexpr double kHuge = 1e308;  // two of them sum to +inf
constexpr double kSub = 4.9406564584124654e-324;  // the smallest subnormal

// Two sources: rows 0..n/2-1 and n/2..n-1.
std::vector<MixSampler::Source> two_sources(uint64_t n) {
  std::vector<MixSampler::Source> s(2);
  for (uint64_t i = 0; i < n; ++i) s[i < n / 2 ? 0 : 1].indices.push_back(static_cast<int64_t>(i));
  for (auto& x : s) x.n = x.indices.size();
  return s;
}

std::vector<uint64_t> counts(const MixSampler& m, uint64_t b) {
  std::vector<uint64_t> c(m.source_count());
  m.batch_counts(b, c.data());
  return c;
}

std::vector<int64_t> batch(MixSampler& m, uint64_t b) {
  std::vector<int64_t> v(m.batch_size());
  v.resize(m.fill_part(b, 0, 1, v.data(), nullptr));
  return v;
}

// A mix state (from save_state) with the weights replaced and its CRC32C
// made again: valid bytes, as a checkpoint written by hand would be.
constexpr size_t kMixHead = 40, kMixPerSource = 32;
void put_weights(std::string& st, size_t at, const std::vector<double>& w) {
  for (size_t i = 0; i < w.size(); ++i) {
    uint64_t bits;
    std::memcpy(&bits, &w[i], 8);
    const size_t off = at + kMixHead + kMixPerSource * i + 16;
    for (int k = 0; k < 8; ++k) st[off + k] = static_cast<char>(bits >> (8 * k));
  }
}
void put_crc(std::string& st, size_t at, size_t len) {
  const uint32_t crc = crc32c::compute(st.data() + at, len - 4);
  for (int k = 0; k < 4; ++k) st[at + len - 4 + k] = static_cast<char>(crc >> (8 * k));
}

TEST(MixWeights, FiniteWeightsWhoseSumOverflowsMixByTheirRatio) {
  MixSampler one(two_sources(200), {1.0, 1.0}, 7, 10);
  MixSampler huge(two_sources(200), {kHuge, kHuge}, 7, 10);
  MixSampler top(two_sources(200), {DBL_MAX, DBL_MAX / 3}, 7, 12);
  EXPECT_EQ(huge.weights(), (std::vector<double>{kHuge, kHuge}));  // kept as given
  for (uint64_t b = 0; b < 30; ++b) {
    EXPECT_EQ(counts(huge, b), (std::vector<uint64_t>{5, 5}));
    EXPECT_EQ(batch(huge, b), batch(one, b)) << "batch " << b;
    EXPECT_EQ(counts(top, b), (std::vector<uint64_t>{9, 3}));
  }
}

TEST(MixWeights, SetWeightsTakesOverflowingWeightsAndARefusalChangesNothing) {
  MixSampler m(two_sources(200), {1.0, 3.0}, 3, 8);
  MixSampler even(two_sources(200), {1.0, 3.0}, 3, 8);
  m.set_weights({kHuge, kHuge}, 5);
  even.set_weights({1.0, 1.0}, 5);
  EXPECT_EQ(counts(m, 5), (std::vector<uint64_t>{4, 4}));
  for (uint64_t b = 5; b < 20; ++b) EXPECT_EQ(batch(m, b), batch(even, b)) << "batch " << b;
  // Refused: nothing moves (weights, table, rows consumed, fetchable batches).
  const std::vector<uint64_t> before = {m.consumed(0, 9), m.consumed(1, 9)};
  const auto want = batch(m, 9);
  for (const std::vector<double>& bad :
       {std::vector<double>{kHuge, -1.0}, {INFINITY, 1.0}, {NAN, 1.0}, {0.0, 0.0}, {1.0}}) {
    EXPECT_EQ(dstest::error_of([&] { m.set_weights(bad, 9); }).status(),
              A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(m.weights(), (std::vector<double>{kHuge, kHuge}));
    EXPECT_EQ(counts(m, 9), (std::vector<uint64_t>{4, 4}));
    EXPECT_EQ((std::vector<uint64_t>{m.consumed(0, 9), m.consumed(1, 9)}), before);
    EXPECT_EQ(batch(m, 5), batch(even, 5));  // still fetchable: the base did not move
    EXPECT_EQ(batch(m, 9), want);
  }
  const Error e = dstest::error_of([&] { m.set_weights({kHuge, -1.0}, 9); });
  EXPECT_NE(std::string(e.what()).find("weight of source 1 is -1"), std::string::npos) << e.what();
}

TEST(MixWeights, LoadStateTakesAValidStateWithOverflowingWeights) {
  MixSampler src(two_sources(200), {1.0, 1.0}, 11, 10);
  std::string st = src.save_state(4);
  put_weights(st, 0, {kHuge, kHuge});
  put_crc(st, 0, st.size());
  MixSampler m(two_sources(200), {1.0, 9.0}, 2, 10);
  EXPECT_EQ(m.load_state(st.data(), st.size()), 4u);
  EXPECT_EQ(m.weights(), (std::vector<double>{kHuge, kHuge}));
  EXPECT_EQ(m.seed(), 11u);
  for (uint64_t b = 4; b < 20; ++b) EXPECT_EQ(batch(m, b), batch(src, b)) << "batch " << b;
  // A valid state with weights the mix refuses leaves it as it was.
  std::string bad = st;
  put_weights(bad, 0, {-kHuge, kHuge});
  put_crc(bad, 0, bad.size());
  MixSampler other(two_sources(200), {1.0, 3.0}, 2, 10);
  const auto want = batch(other, 3);
  EXPECT_EQ(dstest::error_of([&] { other.load_state(bad.data(), bad.size()); }).status(),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(other.weights(), (std::vector<double>{1.0, 3.0}));
  EXPECT_EQ(other.seed(), 2u);
  EXPECT_EQ(batch(other, 3), want);
}

TEST(MixWeights, RatiosPastTheQuantisationAndSubnormalWeights) {
  // 1e-308 beside 1e308 is positive but gets no rows; alone (or beside a
  // zero) it takes them all.
  MixSampler far(two_sources(200), {kHuge, 1e-308}, 1, 10);
  MixSampler tiny(two_sources(200), {0.0, 1e-308}, 1, 10);
  MixSampler sub(two_sources(200), {kSub, 2 * kSub}, 1, 9);
  MixSampler subs(two_sources(200), {kSub, kSub}, 1, 10);
  MixSampler mixed(two_sources(200), {kSub, 1e-308}, 1, 10);
  for (uint64_t b = 0; b < 10; ++b) {
    EXPECT_EQ(counts(far, b), (std::vector<uint64_t>{10, 0}));
    EXPECT_EQ(counts(tiny, b), (std::vector<uint64_t>{0, 10}));
    EXPECT_EQ(counts(sub, b), (std::vector<uint64_t>{3, 6}));
    EXPECT_EQ(counts(subs, b), (std::vector<uint64_t>{5, 5}));
    EXPECT_EQ(counts(mixed, b), (std::vector<uint64_t>{0, 10}));
    EXPECT_EQ(batch(far, b).size(), 10u);
  }
  far.set_weights({kSub, kHuge}, 3);
  EXPECT_EQ(counts(far, 3), (std::vector<uint64_t>{0, 10}));
}

// A dataset of 14 runs, and a feed over a mix of its rows.
struct FeedFixture {
  a2test::TempDir tmp;
  std::shared_ptr<const Dataset> ds;
  FeedFixture() {
    std::vector<run::Run> runs;
    for (int i = 0; i < 14; ++i) runs.push_back(dstest::make_run(i, 20 + i));
    ds = dstest::built_dataset(tmp.path(), runs);
  }
  feed::Options opts() const {
    feed::Options o;
    o.depth = 2;
    o.threads = 1;
    o.pin = feed::Pin::kOff;
    o.columns = 0;
    return o;
  }
};

std::vector<int64_t> next_indices(feed::Feed& f) {
  bool ended = false;
  feed::Slot* s = f.next(std::chrono::milliseconds(-1), &ended);
  EXPECT_TRUE(s);
  if (!s) return {};
  const auto* p = reinterpret_cast<const int64_t*>(s->base + f.ring().offset(feed::kIndices));
  std::vector<int64_t> v(p, p + s->rows);
  feed::Ring::release(s);
  return v;
}

TEST(MixWeights, AFeedOverAMixTakesOverflowingWeights) {
  FeedFixture fx;
  MixSampler mix(two_sources(fx.ds->rows()), {1.0, 3.0}, 5, 8);
  MixSampler even(two_sources(fx.ds->rows()), {1.0, 3.0}, 5, 8);
  feed::Feed f(fx.ds, mix, 0, fx.opts());
  for (uint64_t b = 0; b < 3; ++b) EXPECT_EQ(next_indices(f), batch(mix, b));
  f.set_weights({kHuge, kHuge});
  even.set_weights({1.0, 1.0}, 3);
  for (uint64_t b = 3; b < 10; ++b) EXPECT_EQ(next_indices(f), batch(even, b)) << "batch " << b;
  // Refused weights: the feed goes on as it was.
  EXPECT_EQ(dstest::error_of([&] { f.set_weights({NAN, 1.0}); }).status(),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(next_indices(f), batch(even, 10));

  // A feed state (its frame around the mix's) with such weights, both CRCs
  // valid: another feed adopts it.
  std::string st = f.save_state();
  constexpr size_t kFeedHeader = 28;
  const size_t inner = st.size() - kFeedHeader - 4;
  put_weights(st, kFeedHeader, {kHuge, kHuge / 4});
  put_crc(st, kFeedHeader, inner);
  put_crc(st, 0, st.size());
  feed::Feed g(fx.ds, mix, 0, fx.opts());
  next_indices(g);
  g.load_state(st.data(), st.size());
  MixSampler want(two_sources(fx.ds->rows()), {1.0, 3.0}, 5, 8);
  want.set_weights({1.0, 1.0}, 3);
  want.set_weights({4.0, 1.0}, 11);
  for (uint64_t b = 11; b < 20; ++b) EXPECT_EQ(next_indices(g), batch(want, b)) << "batch " << b;
}

}  // namespace
