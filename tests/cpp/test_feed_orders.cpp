// Every order through the one feed: for 1 to 8 producer threads and a
// synchronous feed the batches are the order's own (the same rows as the
// order's fill, in sequence), and a checkpoint of one kind of order is
// refused by a feed of another, naming both.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "feed/feed.hpp"
#include "order/replay_order.hpp"
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
    for (int i = 0; i < 12; ++i) runs.push_back(dstest::make_run(i, 20 + 7 * i));
    ds = dstest::built_dataset(tmp.path(), runs);
  }
};

feed::Options opts(uint32_t threads, uint32_t depth) {
  feed::Options o;
  o.batch_size = 24;
  o.seed = 17;
  o.threads = threads;
  o.depth = depth;
  o.pin = feed::Pin::kOff;
  o.spare_consumer_cpu = false;
  return o;
}

// The indices of the feed's first n batches.
std::vector<std::vector<int64_t>> take(feed::Feed& f, size_t n) {
  std::vector<std::vector<int64_t>> out;
  for (size_t k = 0; k < n; ++k) {
    bool ended = false;
    feed::Slot* s = f.next(std::chrono::milliseconds(-1), &ended);
    if (!s) break;
    const auto* idx = reinterpret_cast<const int64_t*>(s->base + f.ring().offset(feed::kIndices));
    out.emplace_back(idx, idx + s->rows);
    feed::Ring::release(s);
  }
  return out;
}

using MakeFeed = std::function<std::unique_ptr<feed::Feed>(const feed::Options&)>;

void expect_thread_count_changes_nothing(const MakeFeed& make, size_t n) {
  auto ref = make(opts(1, 0));
  const auto want = take(*ref, n);
  ASSERT_EQ(want.size(), n);
  for (uint32_t threads = 1; threads <= 8; ++threads) {
    auto f = make(opts(threads, 4));
    EXPECT_EQ(take(*f, n), want) << threads << " threads";
  }
}

}  // namespace

TEST(FeedOrders, EveryOrderIsTheSameForOneToEightThreads) {
  Fixture fx;
  for (auto kind : {Shuffle::kIndex, Shuffle::kStored}) {
    expect_thread_count_changes_nothing(
        [&](feed::Options o) {
          o.shuffle_kind = kind;
          o.epochs = 3;
          return std::make_unique<feed::Feed>(fx.ds, std::vector<int64_t>{}, true, o);
        },
        3 * ((fx.ds->rows() + 23) / 24));
  }
  MixSampler::Source a, b;
  a.identity = true;
  a.n = fx.ds->rows();
  b.indices = {1, 2, 3, 5, 8, 13, 21, 34};
  MixSampler mix({a, b}, {3.0, 1.0}, 9, 24);
  expect_thread_count_changes_nothing(
      [&](const feed::Options& o) { return std::make_unique<feed::Feed>(fx.ds, mix, 0, o); }, 40);
  for (bool replacement : {false, true}) {
    order::ReplayOrder::Options ro;
    ro.window = 5;
    ro.replacement = replacement;
    expect_thread_count_changes_nothing(
        [&](feed::Options o) {
          o.epochs = 2;
          return feed::Feed::over_replay(fx.ds, ro, o);
        },
        30);
  }
}

TEST(FeedOrders, TheFeedServesTheOrdersOwnRows) {
  Fixture fx;
  order::ReplayOrder::Options ro;
  ro.window = 6;
  ro.stride = 6;
  ro.batch_size = 24;
  ro.seed = 17;
  order::ReplayOrder ord(fx.ds->select("", {}), fx.ds->rows(), ro);
  auto f = feed::Feed::over_replay(fx.ds, ro, opts(3, 4));
  const auto got = take(*f, ord.batches_in(0));
  ASSERT_EQ(got.size(), ord.batches_in(0));
  for (size_t b = 0; b < got.size(); ++b) {
    std::vector<int64_t> want(ord.max_rows());
    order::Out out;
    out.indices = want.data();
    want.resize(ord.fill({0, b}, out));
    EXPECT_EQ(got[b], want) << "batch " << b;
  }
}

TEST(FeedOrders, ACheckpointOfAnotherKindOfOrderIsRefusedNamingBoth) {
  Fixture fx;
  feed::Feed epochs(fx.ds, {}, true, opts(1, 2));
  take(epochs, 2);
  const std::string epoch_state = epochs.save_state();
  order::ReplayOrder::Options ro;
  ro.window = 4;
  auto replay = feed::Feed::over_replay(fx.ds, ro, opts(1, 2));
  take(*replay, 2);
  const std::string replay_state = replay->save_state();
  try {
    replay->load_state(epoch_state.data(), epoch_state.size());
    FAIL() << "loaded an epoch state into a replay feed";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("an epoch sampler"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("replay order"), std::string::npos) << e.what();
  }
  EXPECT_THROW(epochs.load_state(replay_state.data(), replay_state.size()), Error);
  // Refused states change nothing: both feeds go on where they were.
  EXPECT_EQ(take(*replay, 1).size(), 1u);
  EXPECT_EQ(take(epochs, 1).size(), 1u);
}
