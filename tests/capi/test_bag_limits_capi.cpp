// The bag reader's limits and notes through the C API: max_record_bytes appended to the options (an older, shorter struct
// keeps the default), a2pack_bag_reader_sizes from frame headers, notes for
// unreferenced bytes and strict mode, a2pack_clean_temps, the function table.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "a2pack.h"

namespace {

struct Dir {
  std::string path;
  Dir() {
    std::string t = (std::filesystem::temp_directory_path() / "a2pack-capi-lim-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& n) const { return path + "/" + n; }
};

// A zstd frame of `size` zero bytes made of RLE blocks (4 bytes per 128 KiB).
std::string rle_frame(uint64_t size) {
  std::string f = "\x28\xB5\x2F\xFD";
  f += static_cast<char>(0xA0);  // 4-byte content size, single segment
  for (int i = 0; i < 4; ++i) f += static_cast<char>((size >> (8 * i)) & 0xFF);
  uint64_t left = size;
  do {
    uint32_t n = static_cast<uint32_t>(left < (128u << 10) ? left : (128u << 10));
    left -= n;
    uint32_t h = (n << 3) | (1u << 1) | (left == 0 ? 1u : 0u);
    f += static_cast<char>(h & 0xFF);
    f += static_cast<char>((h >> 8) & 0xFF);
    f += static_cast<char>((h >> 16) & 0xFF);
    f += '\0';
  } while (left);
  return f;
}

void write_stored(const std::string& path, const std::vector<std::string>& recs,
                  a2pack_bag_limits_placement placement = A2PACK_BAG_LIMITS_TAIL) {
  a2pack_bag_writer_options o;
  a2pack_bag_writer_options_init(&o);
  o.compression = A2PACK_BAG_COMPRESSION_NONE;
  o.limits_placement = placement;
  a2pack_bag_writer* w = nullptr;
  ASSERT_EQ(a2pack_bag_writer_open(path.c_str(), &o, &w), A2PACK_OK) << a2pack_last_error();
  for (const auto& r : recs)
    ASSERT_EQ(a2pack_bag_writer_write(w, reinterpret_cast<const uint8_t*>(r.data()), r.size()),
              A2PACK_OK);
  ASSERT_EQ(a2pack_bag_writer_commit(w), A2PACK_OK) << a2pack_last_error();
  a2pack_bag_writer_close(w);
}

TEST(CapiBagLimits, MaxRecordBytesAndSizes) {
  Dir d;
  std::string p = d / "bomb.bagz";  // stored frames, read as zstd by extension
  write_stored(p, {rle_frame(3u << 20), rle_frame(10), ""});
  a2pack_bag_reader_options o;
  a2pack_bag_reader_options_init(&o);
  EXPECT_EQ(o.max_record_bytes, A2PACK_BAG_DEFAULT_MAX_RECORD_BYTES);
  EXPECT_EQ(o.strict, 0u);
  o.max_record_bytes = 1u << 20;
  a2pack_bag_reader* r = nullptr;
  ASSERT_EQ(a2pack_bag_reader_open(p.c_str(), &o, &r), A2PACK_OK) << a2pack_last_error();
  EXPECT_STREQ(a2pack_bag_reader_notes(r), "");
  uint64_t idx[3] = {0, 1, 2}, sizes[3] = {};
  ASSERT_EQ(a2pack_bag_reader_sizes(r, idx, 3, 0, sizes), A2PACK_OK) << a2pack_last_error();
  EXPECT_EQ(sizes[0], 3u << 20);
  EXPECT_EQ(sizes[1], 10u);
  EXPECT_EQ(sizes[2], 0u);
  uint64_t bad = 3;
  EXPECT_EQ(a2pack_bag_reader_sizes(r, &bad, 1, 0, sizes), A2PACK_E_OUT_OF_RANGE);
  a2pack_bag_batch* b = nullptr;
  EXPECT_EQ(a2pack_bag_reader_read(r, idx, 2, 0, &b), A2PACK_E_UNSUPPORTED);
  std::string msg = a2pack_last_error();
  EXPECT_NE(msg.find("bomb.bagz: record 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1048576"), std::string::npos) << msg;
  ASSERT_EQ(a2pack_bag_reader_read(r, idx + 1, 2, 0, &b), A2PACK_OK);
  a2pack_bag_batch_close(b);
  a2pack_bag_reader_close(r);

  // A caller compiled before the field existed (a shorter struct) gets the
  // default limit, which a 3 MiB record is well under.
  o.size = offsetof(a2pack_bag_reader_options, max_record_bytes);
  o.max_record_bytes = 1;  // beyond the caller's size: never read
  ASSERT_EQ(a2pack_bag_reader_open(p.c_str(), &o, &r), A2PACK_OK) << a2pack_last_error();
  ASSERT_EQ(a2pack_bag_reader_read(r, idx, 1, 0, &b), A2PACK_OK) << a2pack_last_error();
  a2pack_bag_batch_close(b);
  a2pack_bag_reader_close(r);
}

TEST(CapiBagLimits, UnreferencedBytesNoteAndStrict) {
  Dir d;
  std::string p = d / "s.bag";
  write_stored(p, {"aa", "bbb", "c"}, A2PACK_BAG_LIMITS_SEPARATE);
  std::filesystem::resize_file(d / "limits.s.bag", 16);  // the last limit cut off
  a2pack_bag_reader_options o;
  a2pack_bag_reader_options_init(&o);
  o.limits_placement = A2PACK_BAG_LIMITS_SEPARATE;
  a2pack_bag_reader* r = nullptr;
  ASSERT_EQ(a2pack_bag_reader_open(p.c_str(), &o, &r), A2PACK_OK) << a2pack_last_error();
  EXPECT_EQ(a2pack_bag_reader_count(r), 2u);
  std::string note = a2pack_bag_reader_notes(r);
  EXPECT_NE(note.find("s.bag: 1 bytes after the last limit"), std::string::npos) << note;
  a2pack_bag_reader_close(r);
  EXPECT_STREQ(a2pack_bag_reader_notes(nullptr), "");
  o.strict = 1;
  EXPECT_EQ(a2pack_bag_reader_open(p.c_str(), &o, &r), A2PACK_E_CORRUPT);
  EXPECT_EQ(r, nullptr);
}

TEST(CapiBagLimits, CleanTempsOfAKilledWriter) {
  Dir d;
  std::string out = d / "k.bag";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    a2pack_bag_writer* w = nullptr;
    if (a2pack_bag_writer_open(out.c_str(), nullptr, &w) != A2PACK_OK) ::_exit(1);
    std::ofstream(out + ".ready").put('x');
    for (;;) ::pause();
  }
  while (!std::filesystem::exists(out + ".ready")) ::usleep(1000);
  auto temps = [&] {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(d.path))
      if (e.path().filename().string().rfind("k.bag.tmp-", 0) == 0) v.push_back(e.path());
    return v;
  };
  ASSERT_EQ(temps().size(), 1u);
  uint64_t removed = 99;
  ASSERT_EQ(a2pack_clean_temps(out.c_str(), nullptr, nullptr, &removed), A2PACK_OK);
  EXPECT_EQ(removed, 0u);  // its writer is alive
  ::kill(child, SIGKILL);
  int st = 0;
  ::waitpid(child, &st, 0);
  ASSERT_EQ(temps().size(), 1u);
  std::vector<std::string> seen;
  auto fn = [](void* u, const char* path) { static_cast<std::vector<std::string>*>(u)->push_back(path); };
  ASSERT_EQ(a2pack_clean_temps(d.path.c_str(), fn, &seen, &removed), A2PACK_OK);
  EXPECT_EQ(removed, 1u);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NE(seen[0].find("k.bag.tmp-" + std::to_string(child) + "-"), std::string::npos);
  EXPECT_TRUE(temps().empty());
  EXPECT_EQ(a2pack_clean_temps((d / "no/such/x.bag").c_str(), nullptr, nullptr, nullptr),
            A2PACK_E_NOT_FOUND);
  EXPECT_EQ(a2pack_clean_temps(nullptr, nullptr, nullptr, nullptr), A2PACK_E_INVALID_ARGUMENT);
}

TEST(CapiBagLimits, FunctionTable) {
  const a2pack_api_table* api = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->bag->reader_notes, &a2pack_bag_reader_notes);
  EXPECT_EQ(api->bag->reader_sizes, &a2pack_bag_reader_sizes);
  EXPECT_EQ(api->clean_temps, &a2pack_clean_temps);
}

}  // namespace
