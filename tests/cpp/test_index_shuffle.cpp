// The stateless index shuffle: a bijection of [0, n) for every n, fixed by
// (seed, epoch), batch fills equal to position-by-position values, and the
// sampler's checkpoints that say which permutation they walked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "base/crc32c.hpp"
#include "dataset/index_shuffle.hpp"
#include "dataset/sampler.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;
using a2test::status_of;

namespace {

// Whether the order over [0, n) (filled in uneven pieces, as batches are)
// holds every position once; the pieces must also equal at().
void expect_permutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  IndexShuffle s(n, seed, epoch);
  std::vector<uint32_t> out(n);
  for (uint64_t start = 0, piece = 1; start < n; start += piece, piece = piece * 3 + 1)
    s.fill(start, static_cast<size_t>(std::min<uint64_t>(piece, n - start)), out.data() + start);
  std::vector<uint8_t> seen(n, 0);
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_LT(out[i], n) << "n " << n << " position " << i;
    ASSERT_EQ(seen[out[i]], 0) << "n " << n << ": " << out[i] << " twice";
    seen[out[i]] = 1;
  }
  for (uint64_t i = 0; i < n; i += 1 + n / 64) ASSERT_EQ(s.at(static_cast<uint32_t>(i)), out[i]);
}

}  // namespace

TEST(IndexShuffle, IsAPermutationForEveryNUpToTwoThousandAndSmallPrimes) {
  for (uint64_t n = 1; n <= 2000; ++n) expect_permutation(n, n * 7, n % 5);
  for (uint64_t n : {2u, 3u, 5u, 7u, 11u, 13u, 4099u, 65521u, 65537u, 131071u})
    for (uint64_t seed : {0u, 1u, 12345u}) expect_permutation(n, seed, seed + 3);
}

TEST(IndexShuffle, IsAPermutationAtAMillionAndAtPowersOfTwoAndTheirNeighbours) {
  expect_permutation(1000000, 42, 0);
  for (uint64_t n : {uint64_t{1} << 16, (uint64_t{1} << 16) + 1, (uint64_t{1} << 20) - 1,
                     (uint64_t{1} << 20) + 1})
    expect_permutation(n, 9, 1);
}

TEST(IndexShuffle, DependsOnSeedAndEpochOnlyAndLooksShuffled) {
  const uint64_t n = 100000;
  std::vector<uint32_t> a(n), b(n), c(n), d(n);
  IndexShuffle(n, 5, 0).fill(0, n, a.data());
  IndexShuffle(n, 5, 0).fill(0, n, b.data());
  IndexShuffle(n, 6, 0).fill(0, n, c.data());
  IndexShuffle(n, 5, 1).fill(0, n, d.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  // Not the identity nor anything near it: few fixed points (1 expected for
  // a uniform permutation), and neighbours land far apart on average (about
  // n/3 apart for a uniform one).
  size_t fixed = 0;
  double gap = 0;
  for (uint64_t i = 0; i < n; ++i) {
    fixed += a[i] == i;
    if (i) gap += std::fabs(double(a[i]) - double(a[i - 1]));
  }
  EXPECT_LT(fixed, 20u);
  EXPECT_GT(gap / double(n - 1), double(n) / 4);
  // Each quarter of the positions takes rows from every quarter of the rows.
  for (int q = 0; q < 4; ++q) {
    size_t counts[4] = {};
    for (uint64_t i = q * n / 4; i < (q + 1) * n / 4; ++i) ++counts[a[i] * 4 / n];
    for (size_t k : counts) EXPECT_GT(k, n / 16 - n / 40) << "quarter " << q;
  }
}

TEST(IndexShuffle, SamplerBatchesOverASelectionAreTheShuffledSelection) {
  std::vector<int64_t> idx(1000);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i * 3 + 1);
  Sampler s(idx, false, 0, 11, 64, false, true, Shuffle::kIndex);
  Sampler t = s;  // copies share the selection; the index shuffle is a value
  s.set_epoch(2);
  t.set_epoch(2);
  IndexShuffle ref(idx.size(), 11, 2);
  std::vector<int64_t> got(64), part(64);
  std::vector<int64_t> all;
  for (size_t b = 0; b < s.batch_count(); ++b) {
    const size_t len = s.fill_batch(b, got.data());
    for (size_t i = 0; i < len; ++i) ASSERT_EQ(got[i], idx[ref.at(uint32_t(b * 64 + i))]);
    all.insert(all.end(), got.begin(), got.begin() + len);
    // Ranks take slices of the same global batch.
    for (uint32_t r = 0; r < 3; ++r) {
      size_t lo, hi;
      Sampler::part_bounds(len, r, 3, &lo, &hi);
      ASSERT_EQ(t.fill_part(b, r, 3, part.data()), hi - lo);
      ASSERT_TRUE(std::equal(part.begin(), part.begin() + (hi - lo), got.begin() + lo));
    }
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want = idx;
  EXPECT_EQ(all, want);
}

TEST(IndexShuffle, StatesSayWhichPermutationAndAnOldStateKeepsItsOrder) {
  std::vector<int64_t> none;
  Sampler stored(none, true, 5000, 3, 100, false, true, Shuffle::kStored);
  Sampler index(none, true, 5000, 3, 100, false, true, Shuffle::kIndex);
  stored.set_epoch(4);
  index.set_epoch(4);
  std::vector<int64_t> a(100), b(100);
  stored.fill_batch(0, a.data());
  index.fill_batch(0, b.data());
  EXPECT_NE(a, b);  // two different orders of the same rows

  // An index-shuffle state loaded into a sampler made for the stored
  // permutation (and the other way round) brings its own kind.
  const std::string si = index.save_state(9), ss = stored.save_state(9);
  Sampler x(none, true, 5000, 0, 100, false, true, Shuffle::kStored);
  EXPECT_EQ(x.load_state(si.data(), si.size()), 9u);
  EXPECT_EQ(x.shuffle(), Shuffle::kIndex);
  Sampler y(none, true, 5000, 0, 100, false, true, Shuffle::kIndex);
  EXPECT_EQ(y.load_state(ss.data(), ss.size()), 9u);
  EXPECT_EQ(y.shuffle(), Shuffle::kStored);
  std::vector<int64_t> xa(100), ya(100);
  for (size_t k = 0; k < 50; ++k) {
    x.fill_batch(k, xa.data());
    index.fill_batch(k, b.data());
    ASSERT_EQ(xa, b);
    y.fill_batch(k, ya.data());
    stored.fill_batch(k, a.data());
    ASSERT_EQ(ya, a);
  }
  // A state written before the index shuffle existed has flags 0 beside
  // drop_last: it is a stored-permutation state. Its bytes are those the
  // stored sampler writes today, so it loads and keeps its order.
  EXPECT_EQ(static_cast<uint8_t>(ss[56]) & 2, 0);
  // Flags this library does not know are refused, not ignored.
  std::string odd = si;
  odd[56] |= 4;
  const uint32_t crc = crc32c::compute(odd.data(), odd.size() - 4);
  for (int k = 0; k < 4; ++k) odd[odd.size() - 4 + k] = static_cast<char>((crc >> (8 * k)) & 0xFF);
  EXPECT_EQ(status_of([&] { x.load_state(odd.data(), odd.size()); }), A2PACK_E_UNSUPPORTED);
}

// The order is part of every checkpoint that names the index shuffle: a
// state saved by any earlier build must walk the same positions, so the
// values are pinned (a faster network must compute the same one).
TEST(IndexShuffle, TheOrderIsPinnedSoSavedStatesKeepTheirBatches) {
  struct Case {
    uint64_t n, seed, epoch;
    uint32_t crc, first[3];
  };
  for (const Case& c : {Case{37, 3, 0, 0xE953886Du, {33, 34, 3}},
                        Case{1000003, 7, 2, 0x23ECC7BEu, {571052, 544028, 272735}}}) {
    std::vector<uint32_t> v(c.n);
    IndexShuffle(c.n, c.seed, c.epoch).fill(0, c.n, v.data());
    EXPECT_EQ(crc32c::compute(v.data(), v.size() * sizeof v[0]), c.crc) << "n " << c.n;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(v[i], c.first[i]) << "n " << c.n << " position " << i;
  }
}
