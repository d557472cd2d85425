// The C ABI of sampler checkpoints, rank parts and the mixing sampler:
// restore gives the same batches, parts tile the global batch, mixing counts
// are exact, and foreign or damaged states are refused with the sampler
// unchanged.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "a2pack.h"

namespace {

std::string take(uint8_t* p, size_t n) {
  std::string s(reinterpret_cast<char*>(p), n);
  a2pack_free(p);
  return s;
}

}  // namespace

TEST(CapiSamplerState, RestoreAndPartsAndRefusal) {
  a2pack_dataset_sampler *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(a2pack_dataset_sampler_open(nullptr, 300, 5, 32, 0, &a), A2PACK_OK);
  ASSERT_EQ(a2pack_dataset_sampler_open(nullptr, 300, 6, 32, 0, &b), A2PACK_OK);
  ASSERT_EQ(a2pack_dataset_sampler_open(nullptr, 301, 5, 32, 0, &c), A2PACK_OK);
  ASSERT_EQ(a2pack_dataset_sampler_set_epoch(a, 3), A2PACK_OK);
  uint8_t* p = nullptr;
  size_t n = 0;
  ASSERT_EQ(a2pack_dataset_sampler_state(a, 4, &p, &n), A2PACK_OK);
  const std::string st = take(p, n);
  uint64_t next = 0;
  ASSERT_EQ(a2pack_dataset_sampler_load_state(b, st.data(), st.size(), &next), A2PACK_OK);
  EXPECT_EQ(next, 4u);
  EXPECT_EQ(a2pack_dataset_sampler_epoch(b), 3u);
  std::vector<int64_t> x(32), y(32), part(32);
  size_t nx = 0, ny = 0, np = 0;
  for (size_t k = 0; k < a2pack_dataset_sampler_batch_count(a); ++k) {
    ASSERT_EQ(a2pack_dataset_sampler_batch(a, k, x.data(), &nx), A2PACK_OK);
    ASSERT_EQ(a2pack_dataset_sampler_batch(b, k, y.data(), &ny), A2PACK_OK);
    ASSERT_EQ(x, y);
    std::vector<int64_t> joined;
    for (uint32_t r = 0; r < 3; ++r) {
      ASSERT_EQ(a2pack_dataset_sampler_part(a, k, r, 3, part.data(), &np), A2PACK_OK);
      joined.insert(joined.end(), part.begin(), part.begin() + static_cast<long>(np));
    }
    ASSERT_EQ(joined, std::vector<int64_t>(x.begin(), x.begin() + static_cast<long>(nx)));
  }
  EXPECT_EQ(a2pack_dataset_sampler_part(a, 0, 3, 3, part.data(), &np), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_dataset_sampler_load_state(c, st.data(), st.size(), &next),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(a2pack_last_error(), "another set of rows"), nullptr);
  EXPECT_EQ(a2pack_dataset_sampler_epoch(c), 0u);  // unchanged
  std::string bad = st;
  bad[30] ^= 1;
  EXPECT_EQ(a2pack_dataset_sampler_load_state(b, bad.data(), bad.size(), &next), A2PACK_E_CORRUPT);
  EXPECT_EQ(a2pack_dataset_sampler_state(nullptr, 0, &p, &n), A2PACK_E_INVALID_ARGUMENT);
  a2pack_dataset_sampler_close(a);
  a2pack_dataset_sampler_close(b);
  a2pack_dataset_sampler_close(c);
}

TEST(CapiMix, ExactCountsPartsStateAndWeights) {
  std::vector<int64_t> odd(50);
  for (size_t i = 0; i < odd.size(); ++i) odd[i] = static_cast<int64_t>(2 * i + 1);
  a2pack_dataset_mix_source src[2] = {{nullptr, 100}, {odd.data(), odd.size()}};
  const double w[2] = {0.7, 0.3};
  a2pack_dataset_mix *m = nullptr, *r = nullptr;
  ASSERT_EQ(a2pack_dataset_mix_open(src, w, 2, 9, 10, &m), A2PACK_OK);
  ASSERT_EQ(a2pack_dataset_mix_open(src, w, 2, 1, 10, &r), A2PACK_OK);
  std::vector<int64_t> idx(10), part(10);
  std::vector<uint32_t> s(10), ps(10);
  size_t n = 0, pn = 0;
  for (uint64_t b = 0; b < 30; ++b) {
    uint64_t cnt[2];
    ASSERT_EQ(a2pack_dataset_mix_counts(m, b, cnt), A2PACK_OK);
    EXPECT_EQ(cnt[0], 7u);
    EXPECT_EQ(cnt[1], 3u);
    ASSERT_EQ(a2pack_dataset_mix_batch(m, b, 0, 1, idx.data(), s.data(), &n), A2PACK_OK);
    ASSERT_EQ(n, 10u);
    size_t from1 = 0;
    for (size_t i = 0; i < n; ++i) {
      from1 += s[i];
      if (s[i] == 1) EXPECT_EQ(idx[i] % 2, 1);
    }
    EXPECT_EQ(from1, 3u);
    std::vector<int64_t> joined;
    for (uint32_t k = 0; k < 4; ++k) {
      ASSERT_EQ(a2pack_dataset_mix_batch(m, b, k, 4, part.data(), ps.data(), &pn), A2PACK_OK);
      joined.insert(joined.end(), part.begin(), part.begin() + static_cast<long>(pn));
    }
    EXPECT_EQ(joined, idx);
  }
  uint8_t* p = nullptr;
  size_t len = 0;
  const double even[2] = {1, 1};
  ASSERT_EQ(a2pack_dataset_mix_set_weights(m, even, 2, 12), A2PACK_OK);
  ASSERT_EQ(a2pack_dataset_mix_state(m, 20, &p, &len), A2PACK_OK);
  const std::string st = take(p, len);
  EXPECT_EQ(st.size(), 44u + 32u * 2);
  uint64_t next = 0;
  ASSERT_EQ(a2pack_dataset_mix_load_state(r, st.data(), st.size(), &next), A2PACK_OK);
  EXPECT_EQ(next, 20u);
  double got[2];
  ASSERT_EQ(a2pack_dataset_mix_get_weights(r, got), A2PACK_OK);
  EXPECT_EQ(got[0], 1.0);
  std::vector<int64_t> a(10), b2(10);
  for (uint64_t b = 20; b < 40; ++b) {
    ASSERT_EQ(a2pack_dataset_mix_batch(m, b, 0, 1, a.data(), nullptr, &n), A2PACK_OK);
    ASSERT_EQ(a2pack_dataset_mix_batch(r, b, 0, 1, b2.data(), nullptr, &n), A2PACK_OK);
    ASSERT_EQ(a, b2) << b;
  }
  EXPECT_EQ(a2pack_dataset_mix_batch(r, 3, 0, 1, a.data(), nullptr, &n), A2PACK_E_OUT_OF_RANGE);
  std::string bad = st;
  bad[50] ^= 4;
  EXPECT_EQ(a2pack_dataset_mix_load_state(r, bad.data(), bad.size(), &next), A2PACK_E_CORRUPT);
  const double zero[2] = {0, 0};
  EXPECT_EQ(a2pack_dataset_mix_set_weights(r, zero, 2, 40), A2PACK_E_INVALID_ARGUMENT);
  a2pack_dataset_mix* none = nullptr;
  EXPECT_EQ(a2pack_dataset_mix_open(src, w, 0, 9, 10, &none), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
  a2pack_dataset_mix_close(m);
  a2pack_dataset_mix_close(r);
  a2pack_dataset_mix_close(nullptr);
}
