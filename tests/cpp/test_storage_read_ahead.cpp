// storage::ReadObject read-ahead, on an in-memory object that counts what its
// backend is asked for: sequential reads (single or batched, one or two in
// flight) fetch every byte once, in large parts; random batches fetch
// nothing ahead; a failed part is read again directly and a persistent
// failure is an error.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <random>
#include <vector>

#include "base/error.hpp"
#include "storage/object_store.hpp"

namespace a2pack {
namespace {

class MemObject : public storage::ReadObject {
 public:
  explicit MemObject(size_t size) : data_(size) {
    std::mt19937_64 rng(5);
    for (auto& b : data_) b = static_cast<uint8_t>(rng());
    url_ = "mem://bucket/object";
    size_ = data_.size();
    remote_ = true;
  }
  ~MemObject() override { drain(); }
  const std::vector<uint8_t>& data() const { return data_; }
  mutable std::atomic<uint64_t> fetches{0}, bytes{0};
  mutable std::atomic<int> fail_next{0};

 protected:
  void fetch(uint64_t offset, size_t len, uint8_t* dst) const override {
    fetches++;
    bytes += len;
    if (fail_next.fetch_sub(1) > 0) fail(A2PACK_E_IO, "{}: injected failure", url_);
    std::memcpy(dst, data_.data() + offset, len);
  }

 private:
  std::vector<uint8_t> data_;
};

constexpr size_t kSize = 100u << 20;
constexpr size_t kBatch = 4u << 20;

// Batch k as 64 consecutive ranges (a dense batch of records).
void read_batch(const MemObject& o, size_t k, std::vector<uint8_t>& out) {
  const uint64_t start = k * kBatch;
  const size_t len = static_cast<size_t>(std::min<uint64_t>(kBatch, kSize - start));
  out.assign(len, 0);
  std::vector<storage::ReadRange> rs;
  const size_t piece = len / 64 + 1;
  for (size_t at = 0; at < len; at += piece)
    rs.push_back({start + at, std::min(piece, len - at), out.data() + at});
  o.read_many(rs.data(), rs.size());
}

TEST(StorageReadAhead, SequentialBatchesFetchEachByteOnce) {
  MemObject o(kSize);
  o.set_read_ahead(64u << 20);
  std::vector<uint8_t> out;
  for (size_t k = 0; k * kBatch < kSize; ++k) {
    read_batch(o, k, out);
    ASSERT_EQ(std::memcmp(out.data(), o.data().data() + k * kBatch, out.size()), 0) << k;
  }
  EXPECT_EQ(o.bytes.load(), kSize);
  // The first batch directly, then 8 MiB parts.
  EXPECT_LE(o.fetches.load(), 1 + kSize / storage::ReadObject::kReadAheadPart + 1);
}

TEST(StorageReadAhead, TwoBatchesInFlightFetchEachByteOnce) {
  // As Python's iterator reads: batch k+1 is asked for while k is read.
  MemObject o(kSize);
  o.set_read_ahead(64u << 20);
  const size_t n = kSize / kBatch;
  std::vector<std::vector<uint8_t>> outs(n);
  std::future<void> prev;
  for (size_t k = 0; k < n; ++k) {
    auto f = std::async(std::launch::async, [&, k] { read_batch(o, k, outs[k]); });
    if (prev.valid()) prev.get();
    prev = std::move(f);
  }
  prev.get();
  for (size_t k = 0; k < n; ++k)
    ASSERT_EQ(std::memcmp(outs[k].data(), o.data().data() + k * kBatch, kBatch), 0) << k;
  // Batches that raced ahead of the parts may read a little directly, but
  // nothing is fetched twice in bulk.
  EXPECT_LE(o.bytes.load(), kSize + 2 * kBatch);
}

TEST(StorageReadAhead, RecordAtATimeReads) {
  MemObject o(kSize / 4);
  o.set_read_ahead(64u << 20);
  std::vector<uint8_t> buf(48 << 10);
  for (uint64_t off = 0; off + buf.size() <= o.size(); off += buf.size()) {
    o.read(off, buf.size(), buf.data());
    ASSERT_EQ(std::memcmp(buf.data(), o.data().data() + off, buf.size()), 0) << off;
  }
  EXPECT_LE(o.bytes.load(), o.size());
  EXPECT_LE(o.fetches.load(), 2 + o.size() / storage::ReadObject::kReadAheadPart + 1);
}

TEST(StorageReadAhead, RandomBatchesFetchNothingAhead) {
  MemObject o(kSize);
  o.set_read_ahead(64u << 20);
  std::mt19937_64 rng(1);
  for (int batch = 0; batch < 4; ++batch) {
    std::vector<std::vector<uint8_t>> outs(64);
    std::vector<storage::ReadRange> rs;
    for (auto& out : outs) {
      out.resize(10000);
      rs.push_back({rng() % (kSize - out.size()), out.size(), out.data()});
    }
    o.read_many(rs.data(), rs.size());
    for (size_t i = 0; i < rs.size(); ++i)
      ASSERT_EQ(std::memcmp(outs[i].data(), o.data().data() + rs[i].offset, rs[i].len), 0);
  }
  // 4 x 64 ranges of 10 000 bytes, each request at most a merged gap larger.
  EXPECT_LE(o.bytes.load(), 4u * 64 * (10000 + (16u << 10)));
}

TEST(StorageReadAhead, FailedPartIsReadAgainAndPersistentFailureIsAnError) {
  MemObject o(kSize);
  o.set_read_ahead(16u << 20);
  std::vector<uint8_t> out;
  read_batch(o, 0, out);
  o.fail_next = 1;  // the first part queued by the next (forward) read fails
  for (size_t k = 1; k < 6; ++k) {
    read_batch(o, k, out);
    ASSERT_EQ(std::memcmp(out.data(), o.data().data() + k * kBatch, out.size()), 0) << k;
  }
  o.fail_next = 1 << 20;  // every fetch from now on
  try {
    for (size_t k = 6; k * kBatch < o.size(); ++k) read_batch(o, k, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_IO);
    EXPECT_NE(std::string(e.what()).find("mem://bucket/object"), std::string::npos);
  }
}

}  // namespace
}  // namespace a2pack
