// The C ABI of the upstream ai-2048 tool's random stream and search
// (a2pack_stdrng_*, a2pack_board_*_stdrng, a2pack_expectimax_*): values
// against ones the upstream tool produced (also checked in bulk by
// tests/python/test_ai_2048_reference.py), and every refused argument.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "a2pack.h"

namespace {

a2pack_stdrng* open_rng(uint64_t seed) {
  a2pack_stdrng* r = nullptr;
  EXPECT_EQ(a2pack_stdrng_open(seed, &r), A2PACK_OK);
  return r;
}

TEST(UpstreamEngineCapi, SpawnsFollowUpstreamsStream) {
  // Upstream: Board.empty().with_random_tile(rng=Rng(0)) three times.
  a2pack_stdrng* r = open_rng(0);
  uint64_t b = 0;
  const uint64_t want[] = {281474976710656ull, 282574488338432ull, 300166674382848ull};
  for (uint64_t w : want) {
    ASSERT_EQ(a2pack_board_spawn_stdrng(b, r, &b), A2PACK_OK);
    EXPECT_EQ(b, w);
  }
  // A clone continues the same stream.
  a2pack_stdrng* c = nullptr;
  ASSERT_EQ(a2pack_stdrng_clone(r, &c), A2PACK_OK);
  uint64_t x = 0, y = 0;
  ASSERT_EQ(a2pack_board_make_move_stdrng(b, A2PACK_MOVE_LEFT, r, &x), A2PACK_OK);
  ASSERT_EQ(a2pack_board_make_move_stdrng(b, A2PACK_MOVE_LEFT, c, &y), A2PACK_OK);
  EXPECT_EQ(x, y);
  a2pack_stdrng_close(c);
  a2pack_stdrng_close(r);
  a2pack_stdrng_close(nullptr);
}

TEST(UpstreamEngineCapi, ShuffleIsAPermutationDependingOnlyOnTheSeed) {
  std::vector<uint64_t> a(100), b(100);
  for (uint64_t i = 0; i < 100; ++i) a[i] = b[i] = i;
  a2pack_stdrng *r1 = open_rng(42), *r2 = open_rng(42);
  ASSERT_EQ(a2pack_stdrng_shuffle(r1, a.data(), a.size()), A2PACK_OK);
  ASSERT_EQ(a2pack_stdrng_shuffle(r2, b.data(), b.size()), A2PACK_OK);
  EXPECT_EQ(a, b);
  std::vector<uint64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_EQ(a2pack_stdrng_shuffle(r1, nullptr, 0), A2PACK_OK);
  EXPECT_EQ(a2pack_stdrng_shuffle(r1, nullptr, 3), A2PACK_E_INVALID_ARGUMENT);
  a2pack_stdrng_close(r1);
  a2pack_stdrng_close(r2);
}

TEST(UpstreamEngineCapi, RefusesBadArguments) {
  a2pack_stdrng* r = open_rng(1);
  uint64_t out = 7;
  EXPECT_EQ(a2pack_board_spawn_stdrng(0x123456789ABCDEF1ull, r, &out), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(a2pack_last_error(), "full"), nullptr);
  EXPECT_EQ(a2pack_board_make_move_stdrng(0, 4, r, &out), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_board_spawn_stdrng(0, nullptr, &out), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_board_spawn_stdrng(0, r, nullptr), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_stdrng_open(1, nullptr), A2PACK_E_INVALID_ARGUMENT);
  a2pack_stdrng* c = reinterpret_cast<a2pack_stdrng*>(&out);
  EXPECT_EQ(a2pack_stdrng_clone(nullptr, &c), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(c, nullptr);  // out-parameters are cleared first
  a2pack_stdrng_close(r);

  a2pack_expectimax_options o;
  a2pack_expectimax_options_init(&o);
  o.size = 1;  // not initialised by the caller
  a2pack_expectimax* ex = nullptr;
  EXPECT_EQ(a2pack_expectimax_open(&o, &ex), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(ex, nullptr);
  ASSERT_EQ(a2pack_expectimax_open(nullptr, &ex), A2PACK_OK);
  double ev[4];
  int32_t move = 0;
  EXPECT_EQ(a2pack_expectimax_branch_evals(nullptr, 0, ev, nullptr), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_expectimax_branch_evals(ex, 0, nullptr, nullptr), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_expectimax_best_move(ex, 0, nullptr), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_expectimax_state_value(ex, 0, nullptr), A2PACK_E_INVALID_ARGUMENT);
  // A lost board: no legal move, value 0.
  ASSERT_EQ(a2pack_expectimax_best_move(ex, 0x123456789ABCDEF1ull, &move), A2PACK_OK);
  EXPECT_EQ(move, -1);
  a2pack_expectimax_close(ex);
  a2pack_expectimax_close(nullptr);
}

TEST(UpstreamEngineCapi, ExpectimaxMatchesUpstream) {
  // Upstream: Expectimax().best_move(Board.from_raw(0x1100000000000000)) is DOWN.
  a2pack_expectimax* ex = nullptr;
  ASSERT_EQ(a2pack_expectimax_open(nullptr, &ex), A2PACK_OK);
  int32_t move = -2;
  ASSERT_EQ(a2pack_expectimax_best_move(ex, 0x1100000000000000ull, &move), A2PACK_OK);
  EXPECT_EQ(move, A2PACK_MOVE_DOWN);
  uint64_t nodes = 0, peak = 0;
  a2pack_expectimax_stats(ex, &nodes, &peak);
  EXPECT_GT(nodes, 0u);
  EXPECT_EQ(peak, nodes);
  a2pack_expectimax_reset_stats(ex);
  a2pack_expectimax_stats(ex, &nodes, &peak);
  EXPECT_EQ(nodes + peak, 0u);
  double ev[4];
  uint32_t legal = 0;
  ASSERT_EQ(a2pack_expectimax_branch_evals(ex, 0x1100000000000000ull, ev, &legal), A2PACK_OK);
  EXPECT_EQ(legal, 0xEu);  // Up does not move the top row
  float norm[4];
  a2pack_branches_normalise_f64(ev, legal, norm);
  EXPECT_EQ(norm[0], 0.0f);
  for (float v : norm) EXPECT_TRUE(v >= 0.0f && v < 1.0f);
  a2pack_expectimax_close(ex);
}

}  // namespace
