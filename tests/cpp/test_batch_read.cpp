// Batch reads through io_uring (base/batch_read.hpp) and the record-file
// batches built on them: the same bytes as pread, errors naming the request
// and the file, a forked child with a ring of its own.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <random>

#include "bag/reader.hpp"
#include "bag/writer.hpp"
#include "base/batch_read.hpp"
#include "test_util.hpp"

using namespace a2pack;

namespace {

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

struct Fd {
  int fd;
  explicit Fd(const std::string& path, int flags = O_RDONLY) : fd(::open(path.c_str(), flags)) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A file of `size` random bytes in a folder of its own, open for reading.
std::string write_file(const a2test::TempDir& d, const std::string& data) {
  a2test::write_bytes(d / "f", data.data(), data.size());
  return d / "f";
}
struct RandomFile {
  a2test::TempDir dir;
  std::string data;
  Fd f;
  RandomFile(size_t size, uint32_t seed) : data(random_bytes(size, seed)), f(write_file(dir, data)) {}
};

// `n` random requests over a file of `size` bytes, some of them large and
// some empty, more than the ring holds at once.
std::vector<std::pair<uint64_t, size_t>> random_requests(size_t n, size_t size, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<uint64_t, size_t>> out;
  for (size_t i = 0; i < n; ++i) {
    uint64_t off = rng() % size;
    size_t len = i % 50 == 7 ? 0 : i % 97 == 5 ? size - off : static_cast<size_t>(rng() % 5000);
    if (len > size - off) len = size - off;
    out.push_back({off, len});
  }
  return out;
}

// Reads `req` from `fd` in one batch; true when every request got exactly
// its bytes of `data`.
bool batch_matches(int fd, const std::string& data, const std::vector<std::pair<uint64_t, size_t>>& req) {
  std::vector<std::string> got(req.size());
  std::vector<FileRead> reads;
  for (size_t i = 0; i < req.size(); ++i) {
    got[i].assign(req[i].second, '\xAA');
    reads.push_back({fd, req[i].first, req[i].second, req[i].second, reinterpret_cast<uint8_t*>(got[i].data())});
  }
  if (read_batch(reads.data(), reads.size(), nullptr) != BatchRead::done) return false;
  for (size_t i = 0; i < req.size(); ++i)
    if (got[i] != data.substr(req[i].first, req[i].second)) return false;
  return true;
}

// A bag file of `recs`; with separate limits when asked (they stay whole
// when the records file is cut).
void write_records(const std::string& path, const std::vector<std::string>& recs, bool separate = false) {
  bag::WriterOptions wo;
  if (separate) wo.limits_placement = bag::LimitsPlacement::separate;
  bag::Writer w(path, wo);
  for (const auto& r : recs) w.write(reinterpret_cast<const uint8_t*>(r.data()), r.size());
  w.commit();
}

}  // namespace

TEST(BatchRead, SameBytesAsTheFile) {
  if (!batch_read_available()) GTEST_SKIP() << "io_uring is not available here";
  RandomFile file(3 << 20, 1);
  ASSERT_GE(file.f.fd, 0);
  EXPECT_TRUE(batch_matches(file.f.fd, file.data, random_requests(3 * kBatchReadDepth + 11, file.data.size(), 2)));
}

TEST(BatchRead, FailuresNameTheFirstFailedRequest) {
  if (!batch_read_available()) GTEST_SKIP() << "io_uring is not available here";
  RandomFile file(10000, 3);
  const std::string& data = file.data;
  const Fd& f = file.f;
  std::vector<std::string> buf(300, std::string(100, '\0'));
  std::vector<FileRead> reads;
  for (size_t i = 0; i < buf.size(); ++i)
    reads.push_back({f.fd, i * 10, 100, 100, reinterpret_cast<uint8_t*>(buf[i].data())});
  // Past the end of the file: the file ends before the bytes needed.
  reads[200].offset = 9950;
  BatchReadFailure why;
  ASSERT_EQ(read_batch(reads.data(), reads.size(), &why), BatchRead::failed);
  EXPECT_EQ(why.index, 200u);
  EXPECT_EQ(why.err, 0);
  EXPECT_EQ(why.offset, 10000u);  // where the read stopped
  // The requests queued before it are complete.
  for (size_t i = 0; i < 128; ++i) EXPECT_EQ(buf[i], data.substr(i * 10, 100)) << i;
  // A bad descriptor: its errno.
  reads[200].offset = 0;
  reads[250].fd = 1 << 20;
  ASSERT_EQ(read_batch(reads.data(), reads.size(), &why), BatchRead::failed);
  EXPECT_EQ(why.index, 250u);
  EXPECT_EQ(why.err, EBADF);
  // An O_DIRECT-style request that may stop at the end of the file once its
  // `need` bytes are there.
  std::string tail(4096, '\0');
  FileRead r{f.fd, 8192, 4096, 10000 - 8192, reinterpret_cast<uint8_t*>(tail.data())};
  ASSERT_EQ(read_batch(&r, 1, nullptr), BatchRead::done);
  EXPECT_EQ(tail.substr(0, 10000 - 8192), data.substr(8192));
}

TEST(BatchRead, ForkedChildReadsWithARingOfItsOwn) {
  if (!batch_read_available()) GTEST_SKIP() << "io_uring is not available here";
  RandomFile file(1 << 20, 4);
  auto check = [&](uint32_t seed) {
    return batch_matches(file.f.fd, file.data, random_requests(200, file.data.size(), seed));
  };
  ASSERT_TRUE(check(5));  // the parent's ring exists before the fork
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(check(6) && check(7) ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(check(8));  // the parent's ring still works
}

TEST(BatchRead, RecordBatchesEqualMappedReadsForEveryPolicy) {
  a2test::TempDir d;
  std::mt19937 rng(9);
  std::vector<std::string> recs;
  for (int i = 0; i < 3000; ++i) recs.push_back(random_bytes(rng() % 9000, static_cast<uint32_t>(i)));
  for (const char* name : {"r.bag", "r.bagz"}) {
    write_records(d / name, recs);
    std::vector<uint64_t> idx;
    for (int i = 0; i < 700; ++i) idx.push_back(rng() % recs.size());
    idx.push_back(5), idx.push_back(6), idx.push_back(7);  // neighbours: one span
    for (auto cache : {bag::CachePolicy::drop_after_read, bag::CachePolicy::direct_io}) {
      bag::ReaderOptions o;
      o.cache_policy = cache;
      bag::Reader r({d / name}, o);
      for (uint32_t workers : {1u, 100u}) {
        bag::Batch b = r.read(idx.data(), idx.size(), workers);
        for (size_t k = 0; k < idx.size(); ++k) {
          ASSERT_EQ(b.record(k), recs[idx[k]]) << name << " record " << idx[k];
        }
      }
    }
  }
}

TEST(BatchRead, RecordFileThatShrankIsAnErrorNamingIt) {
  a2test::TempDir d;
  std::vector<std::string> recs;
  for (int i = 0; i < 400; ++i) recs.push_back(random_bytes(3000, static_cast<uint32_t>(i)));
  write_records(d / "s.bag", recs, /*separate=*/true);
  bag::ReaderOptions o;
  o.cache_policy = bag::CachePolicy::drop_after_read;
  o.limits_placement = bag::LimitsPlacement::separate;
  bag::Reader r({d / "s.bag"}, o);
  ASSERT_EQ(::truncate((d / "s.bag").c_str(), 3000 * 200 + 10), 0);
  std::vector<uint64_t> idx{3, 150, 250, 399, 10};
  std::string msg;
  EXPECT_EQ(a2test::status_of([&] { r.read(idx.data(), idx.size(), 0); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find(d / "s.bag"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shrank"), std::string::npos) << msg;
}

// Compressed batches kept out of the page cache decode their frames while
// the rest of the batch is still being read (bag/reader.cpp DecodeAhead):
// past its memory budget the rest decode into the caller's buffers, and a
// bad frame or a file that shrank is an error naming it, never a hang.
TEST(BatchRead, CompressedBatchesDecodedAsTheyArrive) {
  a2test::TempDir d;
  std::vector<std::string> recs;
  for (int i = 0; i < 160; ++i)  // 1 MiB records that compress well: past the 64 MiB budget
    recs.push_back(std::string(1 << 20, static_cast<char>('a' + i % 26)) + random_bytes(100, i));
  for (int i = 0; i < 300; ++i) recs.push_back(random_bytes(i * 37 % 5000, 1000 + i));
  write_records(d / "big.bagz", recs);
  std::vector<uint64_t> idx;  // every other record: a read each
  for (uint64_t i = 0; i < recs.size(); i += 2) idx.push_back(i);
  idx.push_back(459), idx.push_back(0);
  for (auto cache : {bag::CachePolicy::drop_after_read, bag::CachePolicy::direct_io}) {
    bag::ReaderOptions o;
    o.cache_policy = cache;
    bag::Reader r({d / "big.bagz"}, o);
    for (uint32_t workers : {1u, 0u}) {
      bag::Batch b = r.read(idx.data(), idx.size(), workers);
      for (size_t k = 0; k < idx.size(); ++k) ASSERT_EQ(b.record(k), recs[idx[k]]) << "record " << idx[k];
    }
  }
}

TEST(BatchRead, CompressedBatchWithABadFrameOrAShrunkFileIsAnError) {
  a2test::TempDir d;
  std::vector<std::string> recs;
  for (int i = 0; i < 400; ++i) recs.push_back(std::string(3000, static_cast<char>(i)) + random_bytes(50, i));
  write_records(d / "z.bagz", recs, /*separate=*/true);
  std::string file;
  {
    std::ifstream in(d / "z.bagz", std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<uint64_t> limits(recs.size());
  {
    std::ifstream in(d / "limits.z.bagz", std::ios::binary);
    in.read(reinterpret_cast<char*>(limits.data()), static_cast<std::streamsize>(limits.size() * 8));
  }
  // Record 201's block damaged after its header: its size reads fine, its
  // decoding fails, on a decoding thread.
  std::string bad = file;
  for (uint64_t k = limits[200] + 12; k < limits[201]; ++k) bad[k] = static_cast<char>(0xA5 ^ k);
  a2test::write_bytes(d / "z.bagz", bad.data(), bad.size());
  bag::ReaderOptions o;
  o.cache_policy = bag::CachePolicy::drop_after_read;
  o.limits_placement = bag::LimitsPlacement::separate;
  std::vector<uint64_t> idx;
  for (uint64_t i = 1; i < recs.size(); i += 4) idx.push_back(i);  // 201 among them
  {
    bag::Reader r({d / "z.bagz"}, o);
    std::string msg;
    for (int round = 0; round < 3; ++round) {
      EXPECT_EQ(a2test::status_of([&] { r.read(idx.data(), idx.size(), 0); }, &msg), A2PACK_E_CORRUPT);
      EXPECT_NE(msg.find("z.bagz: record 201"), std::string::npos) << msg;
    }
    uint64_t fine[] = {1, 5, 9, 399};
    bag::Batch b = r.read(fine, 4, 0);
    EXPECT_EQ(b.record(3), recs[399]);
  }
  // The file cut short under an open reader: the reads past its end fail
  // while decoders wait for them.
  a2test::write_bytes(d / "z.bagz", file.data(), file.size());
  bag::Reader r({d / "z.bagz"}, o);
  ASSERT_EQ(::truncate((d / "z.bagz").c_str(), static_cast<off_t>(limits[300])), 0);
  std::string msg;
  EXPECT_EQ(a2test::status_of([&] { r.read(idx.data(), idx.size(), 0); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("shrank"), std::string::npos) << msg;
}
