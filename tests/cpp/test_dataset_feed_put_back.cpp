// A batch the consumer never passed on goes back to the feed (put_back):
// the next next() hands out the same slot, and a checkpoint taken meanwhile
// resumes with it, for every depth, across an epoch boundary and over a mix;
// what put_back refuses changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

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

struct Fixture {
  a2test::TempDir tmp;
  std::shared_ptr<const Dataset> ds;
  Fixture() {
    std::vector<run::Run> runs;
    for (int i = 0; i < 5; ++i) runs.push_back(dstest::make_run(i, 20 + 3 * i));
    ds = dstest::built_dataset(tmp.path(), runs);
  }
};

feed::Options opts(uint32_t depth) {
  feed::Options o;
  o.batch_size = 16;  // 130 rows: 9 batches an epoch, the last of 2 rows
  o.depth = depth;
  o.threads = 2;
  o.seed = 5;
  o.pin = feed::Pin::kOff;
  o.columns = 1u << feed::kBoards;
  return o;
}

feed::Slot* take(feed::Feed& f) {
  bool ended = false;
  feed::Slot* s = f.next(std::chrono::milliseconds(-1), &ended);
  EXPECT_TRUE(s);
  return s;
}

std::vector<int64_t> indices(const feed::Feed& f, const feed::Slot* s) {
  const auto* p = reinterpret_cast<const int64_t*>(s->base + f.ring().offset(feed::kIndices));
  return std::vector<int64_t>(p, p + s->rows);
}

std::vector<int64_t> next_indices(feed::Feed& f) {
  feed::Slot* s = take(f);
  if (!s) return {};
  auto v = indices(f, s);
  feed::Ring::release(s);
  return v;
}

TEST(FeedPutBack, TheBatchComesAgainAndACheckpointResumesWithIt) {
  Fixture fx;
  for (uint32_t depth : {0u, 1u, 3u}) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    feed::Feed ref(fx.ds, {}, true, opts(depth));
    std::vector<std::vector<int64_t>> want;
    for (int i = 0; i < 30; ++i) want.push_back(next_indices(ref));
    feed::Feed f(fx.ds, {}, true, opts(depth));
    // Put back at the start, mid-epoch, at the first batch of epoch 1, and
    // at several in a row.
    for (size_t k = 0; k < 30; ++k) {
      feed::Slot* s = take(f);
      ASSERT_EQ(indices(f, s), want[k]);
      if (k == 0 || k == 4 || k == 9 || k == 17 || k == 18) {
        const uint64_t seq = s->sequence;
        f.put_back(s);
        const feed::Stats st = f.stats();
        EXPECT_EQ(st.epoch * st.batches_per_epoch + st.next_batch, k);
        EXPECT_EQ(st.batches_served, k);
        EXPECT_EQ(st.held, 0u);
        // A checkpoint now resumes with the batch put back.
        const std::string state = f.save_state();
        feed::Feed g(fx.ds, {}, true, opts(depth));
        g.load_state(state.data(), state.size());
        for (size_t j = k; j < k + 3 && j < want.size(); ++j)
          EXPECT_EQ(next_indices(g), want[j]) << "resumed at " << k << ", batch " << j;
        // The next next() hands out the same slot, unchanged.
        feed::Slot* again = take(f);
        EXPECT_EQ(again, s);
        EXPECT_EQ(again->sequence, seq);
        EXPECT_EQ(indices(f, again), want[k]);
        s = again;
      }
      feed::Ring::release(s);
    }
  }
}

TEST(FeedPutBack, RefusalsChangeNothing) {
  Fixture fx;
  feed::Feed ref(fx.ds, {}, true, opts(2));
  std::vector<std::vector<int64_t>> want;
  for (int i = 0; i < 8; ++i) want.push_back(next_indices(ref));
  feed::Feed f(fx.ds, {}, true, opts(2));
  feed::Slot* a = take(f);
  feed::Slot* b = take(f);
  auto refused = [&](feed::Slot* s) {
    const Error e = dstest::error_of([&] { f.put_back(s); });
    EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
    return std::string(e.what());
  };
  EXPECT_NE(refused(a).find("not the last one handed out"), std::string::npos);
  b->refs.fetch_add(1);  // retained
  EXPECT_NE(refused(b).find("retained elsewhere"), std::string::npos);
  feed::Ring::release(b);
  EXPECT_EQ(f.stats().next_batch, 2u);
  f.put_back(b);
  EXPECT_NE(refused(b).find("given back already"), std::string::npos);
  EXPECT_EQ(f.stats().next_batch, 1u);
  feed::Ring::release(a);
  EXPECT_EQ(next_indices(f), want[1]);
  // After a load_state the batch handed out before it cannot come back.
  feed::Slot* c = take(f);
  EXPECT_EQ(indices(f, c), want[2]);
  const std::string state = f.save_state();
  f.load_state(state.data(), state.size());
  EXPECT_NE(refused(c).find("before a load_state"), std::string::npos);
  feed::Ring::release(c);
  EXPECT_EQ(next_indices(f), want[3]);
  // A batch put back and then a load_state: the new position wins.
  feed::Slot* d = take(f);
  f.put_back(d);
  f.load_state(state.data(), state.size());
  EXPECT_EQ(next_indices(f), want[3]);
  EXPECT_EQ(f.stats().held, 0u);
}

TEST(FeedPutBack, OverAMix) {
  Fixture fx;
  std::vector<MixSampler::Source> src(2);
  for (uint64_t i = 0; i < fx.ds->rows(); ++i)
    src[i % 3 == 0 ? 0 : 1].indices.push_back(static_cast<int64_t>(i));
  for (auto& x : src) x.n = x.indices.size();
  MixSampler mix(src, {1.0, 2.0}, 4, 12);
  feed::Feed f(fx.ds, mix, 0, opts(2));
  for (uint64_t b = 0; b < 3; ++b) next_indices(f);
  feed::Slot* s = take(f);
  const auto want = indices(f, s);
  f.put_back(s);
  const std::string state = f.save_state();
  feed::Feed g(fx.ds, mix, 0, opts(2));
  g.load_state(state.data(), state.size());
  EXPECT_EQ(next_indices(g), want);
  // New weights from the batch put back on: it is made again with them.
  f.set_weights({0.0, 1.0});
  for (int64_t i : next_indices(f)) EXPECT_NE(i % 3, 0);
}

}  // namespace
