// The bag section of the C API, through the shared library and nothing but
// a2pack.h: writer, reader, batch reads, shard info, indexes, the function
// table, and the statuses a caller sees.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "a2pack.h"

namespace {

struct Dir {
  std::string path;
  Dir() {
    std::string t = (std::filesystem::temp_directory_path() / "a2pack-capi-bag-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& n) const { return path + "/" + n; }
};

std::vector<std::string> records(size_t n) {
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i) v.push_back(std::string(i % 17, static_cast<char>('a' + i % 26)) + std::to_string(i));
  return v;
}

void write_file(const std::string& path, const std::vector<std::string>& recs,
                const a2pack_bag_writer_options* o = nullptr, bool batch = false) {
  a2pack_bag_writer* w = nullptr;
  ASSERT_EQ(a2pack_bag_writer_open(path.c_str(), o, &w), A2PACK_OK) << a2pack_last_error();
  if (batch) {
    std::string all;
    std::vector<uint64_t> off{0};
    for (auto& r : recs) {
      all += r;
      off.push_back(all.size());
    }
    ASSERT_EQ(a2pack_bag_writer_write_batch(w, reinterpret_cast<const uint8_t*>(all.data()),
                                            off.data(), recs.size()),
              A2PACK_OK);
  } else {
    for (auto& r : recs)
      ASSERT_EQ(a2pack_bag_writer_write(w, reinterpret_cast<const uint8_t*>(r.data()), r.size()),
                A2PACK_OK);
  }
  EXPECT_EQ(a2pack_bag_writer_count(w), recs.size());
  ASSERT_EQ(a2pack_bag_writer_commit(w), A2PACK_OK) << a2pack_last_error();
  a2pack_bag_writer_close(w);
}

std::vector<std::string> unpack(a2pack_bag_batch* b) {
  const uint8_t* data;
  const uint64_t* off;
  size_t n;
  a2pack_bag_batch_view(b, &data, &off, &n);
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i)
    v.emplace_back(reinterpret_cast<const char*>(data) + off[i], off[i + 1] - off[i]);
  a2pack_bag_batch_close(b);
  return v;
}

}  // namespace

TEST(CapiBag, WriteReadEveryPlacementAndCompression) {
  Dir d;
  auto recs = records(200);
  for (auto comp : {A2PACK_BAG_COMPRESSION_AUTO, A2PACK_BAG_COMPRESSION_NONE, A2PACK_BAG_COMPRESSION_ZSTD})
    for (auto place : {A2PACK_BAG_LIMITS_TAIL, A2PACK_BAG_LIMITS_SEPARATE})
      for (bool batch : {false, true}) {
        a2pack_bag_writer_options wo;
        a2pack_bag_writer_options_init(&wo);
        wo.compression = comp;
        wo.limits_placement = place;
        std::string path = d / "f.bagz";
        write_file(path, recs, &wo, batch);
        a2pack_bag_reader_options ro;
        a2pack_bag_reader_options_init(&ro);
        ro.compression = comp;
        ro.limits_placement = place;
        a2pack_bag_reader* r = nullptr;
        ASSERT_EQ(a2pack_bag_reader_open(path.c_str(), &ro, &r), A2PACK_OK) << a2pack_last_error();
        ASSERT_EQ(a2pack_bag_reader_count(r), recs.size());
        a2pack_bag_batch* b = nullptr;
        ASSERT_EQ(a2pack_bag_reader_read_range(r, 0, recs.size(), 0, &b), A2PACK_OK);
        EXPECT_EQ(unpack(b), recs);
        uint64_t idx[] = {199, 0, 7, 7};
        ASSERT_EQ(a2pack_bag_reader_read(r, idx, 4, 2, &b), A2PACK_OK);
        EXPECT_EQ(unpack(b), (std::vector<std::string>{recs[199], recs[0], recs[7], recs[7]}));
        int32_t compressed = -1;
        ASSERT_EQ(a2pack_bag_reader_shard_info(r, 0, nullptr, nullptr, &compressed, nullptr), A2PACK_OK);
        EXPECT_EQ(compressed, comp != A2PACK_BAG_COMPRESSION_NONE);
        a2pack_bag_reader_close(r);
        std::filesystem::remove(path);
        std::filesystem::remove(d / "limits.f.bagz");
      }
}

TEST(CapiBag, ShardsAndInfo) {
  Dir d;
  write_file(d / "s-00000-of-00002.bag", {"a", "b"});
  write_file(d / "s-00001-of-00002.bag", {"c"});
  a2pack_bag_reader* r = nullptr;
  ASSERT_EQ(a2pack_bag_reader_open((d / "s@*.bag").c_str(), nullptr, &r), A2PACK_OK);
  EXPECT_EQ(a2pack_bag_reader_count(r), 3u);
  EXPECT_EQ(a2pack_bag_reader_shard_count(r), 2u);
  EXPECT_EQ(a2pack_bag_reader_stored_bytes(r), 3u);
  const char* path = nullptr;
  const char* mode = nullptr;
  uint64_t n = 0;
  ASSERT_EQ(a2pack_bag_reader_shard_info(r, 1, &path, &n, nullptr, &mode), A2PACK_OK);
  EXPECT_EQ(std::string(path), d / "s-00001-of-00002.bag");
  EXPECT_EQ(n, 1u);
  EXPECT_STREQ(mode, "mmap");
  EXPECT_EQ(a2pack_bag_reader_shard_info(r, 2, &path, &n, nullptr, &mode), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(path, nullptr);
  a2pack_bag_reader_close(r);

  const char* paths[] = {(d.path + "/s-00001-of-00002.bag").c_str(), nullptr};
  std::string p0 = d / "s-00001-of-00002.bag", p1 = d / "s-00000-of-00002.bag";
  paths[0] = p0.c_str();
  paths[1] = p1.c_str();
  a2pack_bag_reader_options ro;
  a2pack_bag_reader_options_init(&ro);
  ro.cache_policy = A2PACK_BAG_CACHE_DROP_AFTER_READ;
  ASSERT_EQ(a2pack_bag_reader_open_paths(paths, 2, &ro, &r), A2PACK_OK);
  a2pack_bag_batch* b = nullptr;
  ASSERT_EQ(a2pack_bag_reader_read_range(r, 0, 3, 0, &b), A2PACK_OK);
  EXPECT_EQ(unpack(b), (std::vector<std::string>{"c", "a", "b"}));
  ASSERT_EQ(a2pack_bag_reader_shard_info(r, 0, nullptr, nullptr, nullptr, &mode), A2PACK_OK);
  EXPECT_STREQ(mode, "pread+dontneed");
  a2pack_bag_reader_close(r);
}

TEST(CapiBag, ErrorsAreStatuses) {
  Dir d;
  a2pack_bag_reader* r = reinterpret_cast<a2pack_bag_reader*>(1);
  EXPECT_EQ(a2pack_bag_reader_open((d / "nope.bag").c_str(), nullptr, &r), A2PACK_E_NOT_FOUND);
  EXPECT_EQ(r, nullptr);
  EXPECT_NE(std::string(a2pack_last_error()).find("nope.bag"), std::string::npos);
  EXPECT_EQ(a2pack_bag_reader_open(nullptr, nullptr, &r), A2PACK_E_INVALID_ARGUMENT);
  a2pack_bag_reader_options ro;
  a2pack_bag_reader_options_init(&ro);
  ro.cache_policy = static_cast<a2pack_bag_cache_policy>(9);
  write_file(d / "x.bag", {"a", "b"});
  EXPECT_EQ(a2pack_bag_reader_open((d / "x.bag").c_str(), &ro, &r), A2PACK_E_INVALID_ARGUMENT);
  ro.size = 0;
  EXPECT_EQ(a2pack_bag_reader_open((d / "x.bag").c_str(), &ro, &r), A2PACK_E_INVALID_ARGUMENT);
  ASSERT_EQ(a2pack_bag_reader_open((d / "x.bag").c_str(), nullptr, &r), A2PACK_OK);
  uint64_t idx[] = {1, 2};
  a2pack_bag_batch* b = reinterpret_cast<a2pack_bag_batch*>(1);
  EXPECT_EQ(a2pack_bag_reader_read(r, idx, 2, 0, &b), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(b, nullptr);
  EXPECT_NE(std::string(a2pack_last_error()).find("indices[1] = 2"), std::string::npos);
  EXPECT_EQ(a2pack_bag_reader_read_range(r, 1, 5, 0, &b), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(a2pack_bag_reader_read(r, nullptr, 1, 0, &b), A2PACK_E_INVALID_ARGUMENT);
  ASSERT_EQ(a2pack_bag_reader_read(r, nullptr, 0, 0, &b), A2PACK_OK);  // empty batch
  EXPECT_TRUE(unpack(b).empty());
  a2pack_bag_reader_close(r);
  // Closing NULL handles is allowed.
  a2pack_bag_reader_close(nullptr);
  a2pack_bag_writer_close(nullptr);
  a2pack_bag_batch_close(nullptr);
  a2pack_bag_index_close(nullptr);

  // A writer after commit, and an abandoned writer.
  a2pack_bag_writer* w = nullptr;
  ASSERT_EQ(a2pack_bag_writer_open((d / "w.bag").c_str(), nullptr, &w), A2PACK_OK);
  ASSERT_EQ(a2pack_bag_writer_write(w, reinterpret_cast<const uint8_t*>("x"), 1), A2PACK_OK);
  ASSERT_EQ(a2pack_bag_writer_flush(w), A2PACK_OK);
  EXPECT_FALSE(std::filesystem::exists(d / "w.bag"));
  ASSERT_EQ(a2pack_bag_writer_commit(w), A2PACK_OK);
  EXPECT_EQ(a2pack_bag_writer_write(w, reinterpret_cast<const uint8_t*>("x"), 1), A2PACK_E_CLOSED);
  a2pack_bag_writer_close(w);
  ASSERT_EQ(a2pack_bag_writer_open((d / "gone.bag").c_str(), nullptr, &w), A2PACK_OK);
  ASSERT_EQ(a2pack_bag_writer_write(w, reinterpret_cast<const uint8_t*>("x"), 1), A2PACK_OK);
  a2pack_bag_writer_close(w);
  EXPECT_FALSE(std::filesystem::exists(d / "gone.bag"));
  a2pack_bag_writer_options wo;
  a2pack_bag_writer_options_init(&wo);
  wo.zstd_level = 1000;
  EXPECT_EQ(a2pack_bag_writer_open((d / "l.bagz").c_str(), &wo, &w), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(w, nullptr);
}

TEST(CapiBag, CorruptFilesNameShardAndRecord) {
  Dir d;
  write_file(d / "z.bagz", {std::string(300, 'z'), "ok"});
  {
    std::fstream f(d / "z.bagz", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('\0');
  }
  a2pack_bag_reader* r = nullptr;
  ASSERT_EQ(a2pack_bag_reader_open((d / "z.bagz").c_str(), nullptr, &r), A2PACK_OK);
  a2pack_bag_batch* b = nullptr;
  EXPECT_EQ(a2pack_bag_reader_read_range(r, 0, 2, 0, &b), A2PACK_E_CORRUPT);
  EXPECT_NE(std::string(a2pack_last_error()).find("z.bagz: record 0"), std::string::npos)
      << a2pack_last_error();
  ASSERT_EQ(a2pack_bag_reader_read_range(r, 1, 1, 0, &b), A2PACK_OK);
  EXPECT_EQ(unpack(b), std::vector<std::string>{"ok"});
  a2pack_bag_reader_close(r);
  // Truncated tail.
  std::filesystem::resize_file(d / "z.bagz", std::filesystem::file_size(d / "z.bagz") - 5);
  EXPECT_EQ(a2pack_bag_reader_open((d / "z.bagz").c_str(), nullptr, &r), A2PACK_E_CORRUPT);
}

TEST(CapiBag, IndexAndConcurrentReads) {
  Dir d;
  std::vector<std::string> keys = {"k", "j", "k", "", "k"};
  write_file(d / "i.bagz", keys);
  a2pack_bag_reader* r = nullptr;
  ASSERT_EQ(a2pack_bag_reader_open((d / "i.bagz").c_str(), nullptr, &r), A2PACK_OK);
  a2pack_bag_index* idx = nullptr;
  ASSERT_EQ(a2pack_bag_index_build(r, nullptr, 0, 0, &idx), A2PACK_OK);
  EXPECT_EQ(a2pack_bag_index_unique(idx), 3u);
  const uint64_t* pos = nullptr;
  uint64_t cnt = 0;
  ASSERT_EQ(a2pack_bag_index_find(idx, reinterpret_cast<const uint8_t*>("k"), 1, &pos, &cnt), A2PACK_OK);
  ASSERT_EQ(cnt, 3u);
  EXPECT_EQ(pos[0], 0u);
  EXPECT_EQ(pos[2], 4u);
  ASSERT_EQ(a2pack_bag_index_find(idx, reinterpret_cast<const uint8_t*>("q"), 1, &pos, &cnt), A2PACK_OK);
  EXPECT_EQ(cnt, 0u);
  a2pack_bag_index_close(idx);
  // Many threads on one reader.
  std::vector<std::thread> ts;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k) {
        uint64_t i = static_cast<uint64_t>((t + k) % 5);
        a2pack_bag_batch* b = nullptr;
        if (a2pack_bag_reader_read(r, &i, 1, 1, &b) != A2PACK_OK) return;
        if (unpack(b)[0] != keys[i]) return;
      }
      ok[t] = 1;
    });
  for (auto& t : ts) t.join();
  for (int v : ok) EXPECT_EQ(v, 1);
  // A batch outlives its reader.
  a2pack_bag_batch* b = nullptr;
  ASSERT_EQ(a2pack_bag_reader_read_range(r, 0, 5, 0, &b), A2PACK_OK);
  a2pack_bag_reader_close(r);
  EXPECT_EQ(unpack(b), keys);
}

TEST(CapiBag, FunctionTable) {
  const a2pack_api_table* api = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(api, nullptr);
  ASSERT_NE(api->bag, nullptr);
  EXPECT_EQ(api->bag->size, sizeof(a2pack_bag_api));
  EXPECT_EQ(api->bag->reader_open, &a2pack_bag_reader_open);
  EXPECT_EQ(api->bag->index_close, &a2pack_bag_index_close);
  EXPECT_EQ(api->bag->writer_write_batch, &a2pack_bag_writer_write_batch);
  EXPECT_EQ(api->bag->reader_prepare, &a2pack_bag_reader_prepare);
  EXPECT_EQ(api->bag->pending_fill, &a2pack_bag_pending_fill);
  EXPECT_EQ(api->bag->pending_close, &a2pack_bag_pending_close);
}

// The two-step read: sizes first, then every record into the caller's own
// memory - exactly its bytes, nothing past them - for stored and zstd files,
// mapped and pread, with the reader closed in between.
TEST(CapiBag, PendingReadFillsCallerMemory) {
  Dir d;
  auto recs = records(300);
  recs[5].clear();  // an empty record: its destination may be NULL
  for (const char* name : {"p.bag", "p.bagz"})
    for (auto cache : {A2PACK_BAG_CACHE_SYSTEM, A2PACK_BAG_CACHE_DROP_AFTER_READ}) {
      write_file(d / name, recs);
      a2pack_bag_reader_options ro;
      a2pack_bag_reader_options_init(&ro);
      ro.cache_policy = cache;
      a2pack_bag_reader* r = nullptr;
      ASSERT_EQ(a2pack_bag_reader_open((d / name).c_str(), &ro, &r), A2PACK_OK) << a2pack_last_error();
      std::vector<uint64_t> idx = {299, 5, 0, 17, 17, 150};
      for (uint64_t i = 0; i < 300; i += 3) idx.push_back(i);
      a2pack_bag_pending* p = nullptr;
      const uint64_t* sizes = nullptr;
      ASSERT_EQ(a2pack_bag_reader_prepare(r, idx.data(), idx.size(), 2, &p, &sizes), A2PACK_OK)
          << a2pack_last_error();
      a2pack_bag_reader_close(r);  // the pending read keeps what it needs
      std::vector<std::string> bufs(idx.size());
      std::vector<uint8_t*> dests(idx.size());
      const char guard = '\x5a';
      for (size_t k = 0; k < idx.size(); ++k) {
        ASSERT_EQ(sizes[k], recs[idx[k]].size()) << name << " k=" << k;
        bufs[k].assign(sizes[k] + 8, guard);
        dests[k] = sizes[k] ? reinterpret_cast<uint8_t*>(bufs[k].data()) : nullptr;
      }
      ASSERT_EQ(a2pack_bag_pending_fill(p, dests.data()), A2PACK_OK) << a2pack_last_error();
      for (size_t k = 0; k < idx.size(); ++k) {
        EXPECT_EQ(bufs[k].substr(0, sizes[k]), recs[idx[k]]) << name << " k=" << k;
        EXPECT_EQ(bufs[k].substr(sizes[k]), std::string(8, guard)) << name << " k=" << k;
      }
      // A NULL destination for a non-empty record is refused, naming it.
      dests[2] = nullptr;
      EXPECT_EQ(a2pack_bag_pending_fill(p, dests.data()), A2PACK_E_INVALID_ARGUMENT);
      EXPECT_NE(std::string(a2pack_last_error()).find("dests[2]"), std::string::npos);
      EXPECT_EQ(a2pack_bag_pending_fill(p, nullptr), A2PACK_E_INVALID_ARGUMENT);
      a2pack_bag_pending_close(p);
      std::filesystem::remove(d / name);
    }
  // Bad arguments and indices: statuses, and *out cleared.
  write_file(d / "q.bagz", {"a", "b"});
  a2pack_bag_reader* r = nullptr;
  ASSERT_EQ(a2pack_bag_reader_open((d / "q.bagz").c_str(), nullptr, &r), A2PACK_OK);
  uint64_t bad[] = {0, 2};
  a2pack_bag_pending* p = reinterpret_cast<a2pack_bag_pending*>(&bad);
  const uint64_t* sizes = bad;
  EXPECT_EQ(a2pack_bag_reader_prepare(r, bad, 2, 0, &p, &sizes), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(sizes, nullptr);
  EXPECT_NE(std::string(a2pack_last_error()).find("indices[1] = 2"), std::string::npos);
  EXPECT_EQ(a2pack_bag_reader_prepare(r, bad, 1, 0, &p, nullptr), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_bag_reader_prepare(nullptr, bad, 1, 0, &p, &sizes), A2PACK_E_INVALID_ARGUMENT);
  // An empty read needs no destinations.
  ASSERT_EQ(a2pack_bag_reader_prepare(r, nullptr, 0, 0, &p, &sizes), A2PACK_OK);
  EXPECT_EQ(a2pack_bag_pending_fill(p, nullptr), A2PACK_OK);
  a2pack_bag_pending_close(p);
  a2pack_bag_pending_close(nullptr);
  EXPECT_EQ(a2pack_bag_pending_fill(nullptr, nullptr), A2PACK_E_INVALID_ARGUMENT);
  a2pack_bag_reader_close(r);
}
