// Dataset building blocks: the NPY header, the manifest, the row rule, CRC
// combination, the sampler.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>

#include <cmath>
#include <algorithm>
#include <random>
#include <set>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "dataset/manifest.hpp"
#include "dataset/memory.hpp"
#include "dataset/npy.hpp"
#include "dataset/row.hpp"
#include "dataset/gather.hpp"
#include "dataset/sampler.hpp"
#include "dataset/team.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::dataset;

namespace {
// fn(c) for every chunk c, through the team (each claim handled at once).
void run_chunks(size_t chunks, unsigned threads, const std::function<void(size_t)>& fn) {
  run_claiming(chunks, threads, [&](const ChunkClaim& claim) {
    for (size_t c; (c = claim()) < chunks;) fn(c);
  });
}
}  // namespace

namespace {

std::string header_with(const std::string& dict, int version = 1) {
  std::string h = "\x93NUMPY";
  h.push_back(static_cast<char>(version));
  h.push_back('\0');
  std::string body = dict;
  size_t pre = version == 1 ? 10 : 12;
  while ((pre + body.size() + 1) % 64) body.push_back(' ');
  body.push_back('\n');
  if (version == 1) {
    h.push_back(static_cast<char>(body.size() & 0xFF));
    h.push_back(static_cast<char>(body.size() >> 8));
  } else {
    for (int k = 0; k < 4; ++k) h.push_back(static_cast<char>((body.size() >> (8 * k)) & 0xFF));
  }
  return h + body;
}

const char* kDescrNumpy =
    "[('board', '<u8'), ('move', '|u1'), ('ev_legal', '|u1'), ('ev_values', '<f4', (4,)), "
    "('run_id', '<u4'), ('step_index', '<u2')]";

NpyInfo parse(const std::string& h, uint64_t rows_of_data) {
  uint64_t size = h.size() + 32 * rows_of_data;
  return parse_npy_header(reinterpret_cast<const uint8_t*>(h.data()), h.size(), size, "steps.npy");
}

using a2test::status_of;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(DatasetNpy, HeaderIsNumpysOwnAndAligned) {
  // The bytes np.save writes for this dtype (checked against numpy itself by
  // the Python tests): 256 bytes whatever the row count.
  std::string h = npy_header(5);
  EXPECT_EQ(h.size(), 256u);
  EXPECT_EQ(npy_header(0).size(), 256u);
  EXPECT_EQ(npy_header(123456789012345ull).size(), 256u);
  EXPECT_EQ(npy_header_size(), 256u);
  EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<uint8_t>(h[8]) | static_cast<uint8_t>(h[9]) << 8, 246);
  EXPECT_EQ(h.substr(10, 20), "{'descr': [('board',");
  EXPECT_NE(h.find("'fortran_order': False, 'shape': (5,), }"), std::string::npos);
  EXPECT_EQ(h.back(), '\n');
  NpyInfo info = parse(h, 5);
  EXPECT_EQ(info.rows, 5u);
  EXPECT_EQ(info.data_offset, 256u);
}

TEST(DatasetNpy, AcceptsOtherWritersSpellings) {
  // npyz (upstream) writes '|u1'; other writers 'u1' or '<u1', without the
  // growth padding, with 16-byte alignment, or as NPY 2.0.
  for (const char* u1 : {"'|u1'", "'u1'", "'<u1'"}) {
    std::string d = std::string("{'descr': [('board','<u8'),('move',") + u1 + "),('ev_legal'," +
                    u1 + "),('ev_values','<f4',(4,)),('run_id','<u4'),('step_index','<u2')], " +
                    "'fortran_order': False, 'shape': (3,)}";
    EXPECT_EQ(parse(header_with(d), 3).rows, 3u) << u1;
    EXPECT_EQ(parse(header_with(d, 2), 3).rows, 3u) << u1;
  }
  std::string d = std::string("{'shape': (2,), 'fortran_order': False, 'descr': ") + kDescrNumpy + "}";
  std::string h = header_with(d);
  h.resize(h.size());  // key order does not matter
  EXPECT_EQ(parse(h, 2).data_offset, h.size());
}

TEST(DatasetNpy, RefusesWrongDtypesAndShapes) {
  auto with = [](const std::string& descr, const std::string& rest = "'fortran_order': False, 'shape': (1,)") {
    return header_with("{'descr': " + descr + ", " + rest + "}");
  };
  struct Case {
    std::string header;
    a2pack_status status;
    const char* needle;
  };
  std::vector<Case> cases = {
      {with("'|V32'"), A2PACK_E_UNSUPPORTED, "not a structured dtype"},
      {with("[('board', '<u8'), ('move', '|u1')]"), A2PACK_E_UNSUPPORTED, "2 fields"},
      {with("[('board', '>u8'), ('move', '|u1'), ('ev_legal', '|u1'), ('ev_values', '<f4', (4,)), "
            "('run_id', '<u4'), ('step_index', '<u2')]"),
       A2PACK_E_UNSUPPORTED, "field 'board' has type '>u8'"},
      {with("[('board', '<u8'), ('move', '|u1'), ('legal', '|u1'), ('ev_values', '<f4', (4,)), "
            "('run_id', '<u4'), ('step_index', '<u2')]"),
       A2PACK_E_UNSUPPORTED, "named 'legal'"},
      {with("[('board', '<u8'), ('move', '|u1'), ('ev_legal', '|u1'), ('ev_values', '<f8', (4,)), "
            "('run_id', '<u4'), ('step_index', '<u2')]"),
       A2PACK_E_UNSUPPORTED, "'ev_values' has type '<f8'"},
      {with("[('board', '<u8'), ('move', '|u1'), ('ev_legal', '|u1'), ('ev_values', '<f4', (3,)), "
            "('run_id', '<u4'), ('step_index', '<u2')]"),
       A2PACK_E_UNSUPPORTED, "shape (4,)"},
      {with(kDescrNumpy, "'fortran_order': True, 'shape': (1,)"), A2PACK_E_UNSUPPORTED, "fortran_order"},
      {with(kDescrNumpy, "'fortran_order': False, 'shape': (1, 1)"), A2PACK_E_UNSUPPORTED, "shape must be (N,)"},
      {with(kDescrNumpy, "'fortran_order': False"), A2PACK_E_CORRUPT, "lacks 'shape'"},
      {with(kDescrNumpy, "'fortran_order': False, 'shape': (1,), 'extra': 1"), A2PACK_E_CORRUPT, "unknown key"},
      {header_with("{'descr': [('board', '<u8'"), A2PACK_E_CORRUPT, "NPY header"},
  };
  for (const auto& c : cases) {
    std::string msg;
    a2pack_status st = A2PACK_OK;
    try {
      parse(c.header, 1);
    } catch (const Error& e) {
      st = e.status();
      msg = e.what();
    }
    EXPECT_EQ(st, c.status) << c.header;
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
    EXPECT_NE(msg.find("steps.npy"), std::string::npos) << msg;
  }
}

TEST(DatasetNpy, RefusesTruncatedOrOverlongFiles) {
  std::string h = npy_header(10);
  auto p = reinterpret_cast<const uint8_t*>(h.data());
  std::string m = message_of([&] { parse_npy_header(p, h.size(), h.size() + 32 * 10 - 1, "x/steps.npy"); });
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  EXPECT_NE(m.find("10 rows"), std::string::npos) << m;
  m = message_of([&] { parse_npy_header(p, h.size(), h.size() + 32 * 10 + 5, "x/steps.npy"); });
  EXPECT_NE(m.find("5 unexpected bytes"), std::string::npos) << m;
  EXPECT_EQ(status_of([&] { parse_npy_header(p, 9, 9, "x"); }), A2PACK_E_CORRUPT);
  std::string bad = h;
  bad[1] = 'X';
  EXPECT_EQ(status_of([&] {
              parse_npy_header(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(),
                               bad.size() + 320, "x");
            }),
            A2PACK_E_CORRUPT);
  bad = h;
  bad[6] = 4;
  EXPECT_EQ(status_of([&] {
              parse_npy_header(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(),
                               bad.size() + 320, "x");
            }),
            A2PACK_E_UNSUPPORTED);
  // A header length that runs past the file.
  bad = h;
  bad[8] = '\xff';
  bad[9] = '\x7f';
  EXPECT_EQ(status_of([&] {
              parse_npy_header(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(),
                               bad.size(), "x");
            }),
            A2PACK_E_CORRUPT);
  // A shape whose byte count overflows u64.
  std::string huge = header_with(std::string("{'descr': ") + kDescrNumpy +
                                 ", 'fortran_order': False, 'shape': (18446744073709551615,)}");
  EXPECT_EQ(status_of([&] { parse(huge, 0); }), A2PACK_E_CORRUPT);
}

TEST(DatasetRow, FollowsTheUpstreamRule) {
  Row r;
  float v[4] = {0.25f, -3.0f, 7.0f, NAN};
  make_row(r, 0x1234, 2, v, 0b1111, true, 7, 9);
  EXPECT_EQ(r.board, 0x1234u);
  EXPECT_EQ(r.move, 2);
  EXPECT_EQ(r.ev_legal, 15);
  float ev[4];
  std::memcpy(ev, r.ev_values, 16);
  EXPECT_EQ(ev[0], 0.25f);
  EXPECT_EQ(ev[1], 0.0f);   // clamped
  EXPECT_EQ(ev[2], 1.0f);   // chosen
  EXPECT_EQ(ev[3], 0.0f);   // NaN -> 0
  EXPECT_EQ(r.run_id, 7u);
  EXPECT_EQ(r.step_index, 9);
  // Illegal moves get 0 whatever value the run holds.
  float w[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  make_row(r, 0, 0, w, 0b0101, true, 0, 0);
  std::memcpy(ev, r.ev_values, 16);
  EXPECT_EQ(ev[0], 1.0f);
  EXPECT_EQ(ev[1], 0.0f);
  EXPECT_EQ(ev[2], 0.5f);
  EXPECT_EQ(ev[3], 0.0f);
  // No branches: the chosen move alone, at 1.0.
  make_row(r, 0, 3, w, 0, false, 0, 0);
  std::memcpy(ev, r.ev_values, 16);
  EXPECT_EQ(r.ev_legal, 8);
  EXPECT_EQ(ev[3], 1.0f);
  EXPECT_EQ(ev[0] + ev[1] + ev[2], 0.0f);
}

TEST(DatasetManifest, RoundTripsAndNamesBadKeys) {
  Manifest m;
  m.rows = 123;
  m.runs = 4;
  m.next_run_id = 6;
  m.steps_crc32c = 0xDEADBEEF;
  m.created_utc = "2025-01-01T00:00:00Z";
  m.updated_utc = "2025-01-02T00:00:00Z";
  m.generator = "a2pack test";
  m.sources.push_back({"runs", "dir", 4, 123, 0, "2025-01-01T00:00:00Z"});
  Manifest back = parse_manifest(to_json(m), "manifest.json");
  EXPECT_EQ(back.rows, 123u);
  EXPECT_EQ(back.runs, 4u);
  EXPECT_EQ(back.next_run_id, 6u);
  EXPECT_EQ(back.steps_crc32c, 0xDEADBEEFu);
  ASSERT_EQ(back.sources.size(), 1u);
  EXPECT_EQ(back.sources[0].input, "runs");

  auto msg = [](const std::string& text) { return message_of([&] { parse_manifest(text, "d/manifest.json"); }); };
  EXPECT_NE(msg("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(msg("[]").find("not a JSON object"), std::string::npos);
  std::string j = to_json(m);
  std::string no_rows = j;
  no_rows.replace(no_rows.find("\"rows\": 123"), 11, "\"rowz\": 123");
  EXPECT_NE(msg(no_rows).find("missing key \"rows\""), std::string::npos);
  std::string neg = j;
  neg.replace(neg.find("\"rows\": 123"), 11, "\"rows\": -12");
  EXPECT_NE(msg(neg).find("non-negative"), std::string::npos);
  std::string future = j;
  future.replace(future.find("\"format_version\": 1"), 19, "\"format_version\": 9");
  EXPECT_EQ(status_of([&] { parse_manifest(future, "m"); }), A2PACK_E_UNSUPPORTED);
  std::string other = j;
  other.replace(other.find("a2pack-steps"), 12, "something-el");
  EXPECT_NE(msg(other).find("\"format\""), std::string::npos);
}

TEST(DatasetMemory, RowsAreHugePageAligned) {
  RowMemory m(5 << 20, true);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data()) % (2u << 20), 0u);
  m.data()[(5 << 20) - 1] = 7;  // writable to the end
  RowMemory empty(0, true);
  EXPECT_EQ(empty.data(), nullptr);
}

TEST(DatasetSampler, SameSeedSameBatches) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < 1000; ++i) idx.push_back(i * 3 + 1);
  Sampler a(idx, false, 0, 42, 64, false), b(idx, false, 0, 42, 64, false), c(idx, false, 0, 43, 64, false);
  ASSERT_EQ(a.batch_count(), 16u);  // 15 full + 1 of 40
  EXPECT_EQ(a.batch_length(15), 40u);
  std::vector<int64_t> x(64), y(64), z(64);
  std::multiset<int64_t> seen;
  bool differs = false;
  for (size_t k = 0; k < a.batch_count(); ++k) {
    size_t n = a.fill_batch(k, x.data());
    ASSERT_EQ(b.fill_batch(k, y.data()), n);
    c.fill_batch(k, z.data());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(x[i], y[i]);
      differs |= x[i] != z[i];
      seen.insert(x[i]);
    }
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(seen, std::multiset<int64_t>(idx.begin(), idx.end()));  // a permutation
  // Epochs differ, and an epoch can be replayed out of order.
  a.fill_batch(0, x.data());
  a.set_epoch(1);
  a.fill_batch(0, y.data());
  EXPECT_NE(x, y);
  b.set_epoch(5);
  b.set_epoch(1);
  b.fill_batch(0, z.data());
  EXPECT_EQ(y, z);
  a.set_epoch(0);
  a.fill_batch(0, y.data());
  EXPECT_EQ(x, y);
  EXPECT_EQ(status_of([&] { a.fill_batch(16, x.data()); }), A2PACK_E_OUT_OF_RANGE);
}

TEST(DatasetSampler, IdentityDropLastAndLimits) {
  Sampler s({}, true, 10, 1, 4, true);
  EXPECT_EQ(s.batch_count(), 2u);
  std::set<int64_t> seen;
  std::vector<int64_t> x(4);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(s.fill_batch(k, x.data()), 4u);
    for (auto v : x) {
      EXPECT_GE(v, 0);
      EXPECT_LT(v, 10);
      seen.insert(v);
    }
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(status_of([&] { Sampler({}, true, 10, 1, 0, false); }), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([&] { Sampler({}, true, uint64_t{1} << 33, 1, 1, false); }),
            A2PACK_E_UNSUPPORTED);
  Sampler empty({}, true, 0, 1, 4, false);
  EXPECT_EQ(empty.batch_count(), 0u);
}

TEST(DatasetSampler, CopiesShareUntilReshuffledAndAnUnorderedEpochKeepsItsState) {
  std::vector<int64_t> idx(300);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(7 * i + 2);
  Sampler a(idx, false, 0, 5, 32, false);
  std::vector<int64_t> x(32), y(32);
  Sampler b = a;  // shares a's selection and epoch 0's permutation
  EXPECT_EQ(b.selection().data(), a.selection().data());
  b.set_epoch(3);
  a.fill_batch(2, x.data());
  Sampler fresh(idx, false, 0, 5, 32, false);
  fresh.fill_batch(2, y.data());
  EXPECT_EQ(x, y);  // reshuffling the copy left the original's order alone
  fresh.set_epoch(3);
  b.fill_batch(2, x.data());
  fresh.fill_batch(2, y.data());
  EXPECT_EQ(x, y);
  // Without a permutation: counts and state work, the fills say why they fail.
  Sampler u = a;
  u.set_epoch(4, false);
  EXPECT_EQ(u.epoch(), 4u);
  EXPECT_EQ(u.batch_count(), a.batch_count());
  EXPECT_EQ(status_of([&] { u.fill_batch(0, x.data()); }), A2PACK_E_INTERNAL);
  EXPECT_EQ(status_of([&] { u.fill_part(0, 0, 2, x.data()); }), A2PACK_E_INTERNAL);
  EXPECT_EQ(status_of([&] { u.fill_range(0, 1, x.data()); }), A2PACK_E_INTERNAL);
  const std::string st = u.save_state(1);
  Sampler r(idx, false, 0, 0, 32, false);
  EXPECT_EQ(r.load_state(st.data(), st.size()), 1u);
  EXPECT_EQ(r.epoch(), 4u);
  u.set_epoch(4);
  r.fill_batch(1, x.data());
  u.fill_batch(1, y.data());
  EXPECT_EQ(x, y);
}

TEST(DatasetSampler, RankPartsTileEveryGlobalBatch) {
  std::vector<int64_t> idx(1000);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(3 * i + 1);
  Sampler s(idx, false, 0, 9, 64, false);
  std::vector<int64_t> whole(64), part(64);
  for (uint32_t world = 1; world <= 8; ++world) {
    for (size_t b = 0; b < s.batch_count(); ++b) {
      const size_t len = s.fill_batch(b, whole.data());
      std::vector<int64_t> joined;
      for (uint32_t r = 0; r < world; ++r) {
        const size_t n = s.fill_part(b, r, world, part.data());
        joined.insert(joined.end(), part.begin(), part.begin() + static_cast<long>(n));
      }
      ASSERT_EQ(joined, std::vector<int64_t>(whole.begin(), whole.begin() + static_cast<long>(len)))
          << "world " << world << " batch " << b;
    }
  }
  EXPECT_EQ(status_of([&] { s.fill_part(0, 2, 2, part.data()); }), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([&] { s.fill_part(0, 0, 0, part.data()); }), A2PACK_E_INVALID_ARGUMENT);
}

TEST(DatasetSampler, StateRestoresSeedEpochAndPositionAndRefusesOthers) {
  std::vector<int64_t> idx(500);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i * 2);
  Sampler a(idx, false, 0, 77, 32, false);
  a.set_epoch(5);
  const std::string st = a.save_state(7);
  EXPECT_EQ(st.size(), 64u);  // O(1): never the permutation
  Sampler b(idx, false, 0, 1, 32, false);  // another seed: the state's wins
  EXPECT_EQ(b.load_state(st.data(), st.size()), 7u);
  EXPECT_EQ(b.epoch(), 5u);
  EXPECT_EQ(b.seed(), 77u);
  std::vector<int64_t> x(32), y(32);
  for (size_t k = 0; k < a.batch_count(); ++k) {
    a.fill_batch(k, x.data());
    b.fill_batch(k, y.data());
    ASSERT_EQ(x, y);
  }
  // Another row set, another batch size, a damaged or foreign state: refused.
  std::vector<int64_t> other = idx;
  other[10] = 999999;
  Sampler c(other, false, 0, 77, 32, false);
  EXPECT_EQ(status_of([&] { c.load_state(st.data(), st.size()); }), A2PACK_E_INVALID_ARGUMENT);
  Sampler d(idx, false, 0, 77, 16, false);
  EXPECT_EQ(status_of([&] { d.load_state(st.data(), st.size()); }), A2PACK_E_INVALID_ARGUMENT);
  std::string bad = st;
  bad[20] ^= 1;
  EXPECT_EQ(status_of([&] { b.load_state(bad.data(), bad.size()); }), A2PACK_E_CORRUPT);
  std::string v2 = st;
  v2[4] = 2;
  EXPECT_EQ(status_of([&] { b.load_state(v2.data(), v2.size()); }), A2PACK_E_UNSUPPORTED);
  EXPECT_EQ(status_of([&] { b.load_state("nope", 4); }), A2PACK_E_INVALID_ARGUMENT);
}

TEST(DatasetTeam, RunsEveryChunkOnceRepeatedlyAndConcurrently) {
  for (unsigned round = 0; round < 3000; ++round) {
    unsigned threads = 1 + round % 4;
    size_t chunks = round % 9;
    std::vector<std::atomic<int>> hit(chunks);
    run_chunks(chunks, threads, [&](size_t c) { hit[c]++; });
    for (size_t c = 0; c < chunks; ++c) ASSERT_EQ(hit[c].load(), 1) << round << " chunk " << c;
  }
  // Callers on several threads at once: a busy team makes them run alone.
  std::vector<std::thread> ts;
  std::atomic<uint64_t> done{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int r = 0; r < 500; ++r) {
        std::atomic<int> ran{0};
        run_chunks(6, 3, [&](size_t) { ran++; });
        if (ran == 6) done++;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(done.load(), 2000u);
}

TEST(DatasetTeam, WorksInAForkedChild) {
  run_chunks(4, 2, [](size_t) {});  // the parent's team exists
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(20);  // a hang fails the test instead of blocking it
    std::atomic<int> n{0};
    for (int r = 0; r < 100; ++r) run_chunks(4, 2, [&](size_t) { ++n; });
    ::_exit(n == 400 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(DatasetGather, BoundsCheckFindsTheFirstBadIndexAtEveryPosition) {
  // The check is vectorised 16 indices at a time with a scalar tail: put
  // each kind of bad index at every position of batches of several lengths.
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (uint64_t rows : {uint64_t{1}, uint64_t{7}, uint64_t{10'000'000}, uint64_t(kMax)}) {
    const int64_t last = static_cast<int64_t>(rows - 1);
    for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{40}}) {
      std::vector<int64_t> idx(n);
      for (size_t i = 0; i < n; ++i) idx[i] = i % 2 ? last : 0;  // both ends are inside
      EXPECT_EQ(first_out_of_range(idx.data(), n, rows), n) << rows << " " << n;
      std::vector<int64_t> bads = {-1, kMin, static_cast<int64_t>(rows > uint64_t(kMax) - 1 ? -2 : int64_t(rows))};
      if (rows < uint64_t(kMax)) bads.push_back(kMax);
      for (int64_t bad : bads)
        for (size_t at = 0; at < n; ++at) {
          std::vector<int64_t> b = idx;
          b[at] = bad;
          if (at + 1 < n) b[n - 1] = -5;  // a later bad one must not be reported first
          EXPECT_EQ(first_out_of_range(b.data(), n, rows), at) << rows << " " << n << " " << bad;
        }
    }
  }
  int64_t any = 0;
  EXPECT_EQ(first_out_of_range(&any, 1, 0), 0u);  // no rows: every index is outside
  EXPECT_EQ(first_out_of_range(nullptr, 0, 5), 0u);
}

TEST(DatasetGather, ChunkedGatherEmitsEveryPositionOnceWithItsRow) {
  // gather_chunks on chunks handed out in any order (and by two threads at
  // once): every batch position is emitted exactly once with the row its
  // index names, including a short last chunk and chunks of exactly the
  // prefetch distance.
  const size_t rows = 3000;
  std::vector<uint8_t> base(rows * kRowBytes);
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<uint8_t>(i * 131 + i / 32);
  std::mt19937_64 rng(9);
  for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{129},
                   size_t{1000}, size_t{5000}}) {
    std::vector<int64_t> idx(n);
    for (auto& x : idx) x = static_cast<int64_t>(rng() % rows);
    for (size_t per : {kPrefetchAhead, kPrefetchAhead + 1, size_t{128}, size_t{500}}) {
      const size_t chunks = (n + per - 1) / per;
      std::vector<size_t> order(chunks);
      for (size_t c = 0; c < chunks; ++c) order[c] = c;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<uint8_t> out(n * kRowBytes, 0);
      std::vector<int> seen(n, 0);
      auto emit = [&](size_t i, const uint8_t* row) {
        ++seen[i];
        std::memcpy(out.data() + i * kRowBytes, row, kRowBytes);
      };
      size_t k = 0;
      gather_chunks(base.data(), idx.data(), n, per,
                    [&] { return k < chunks ? order[k++] : chunks; }, emit);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(seen[i], 1) << "n " << n << " per " << per << " position " << i;
        ASSERT_EQ(std::memcmp(out.data() + i * kRowBytes, base.data() + idx[i] * kRowBytes, kRowBytes), 0);
      }
      // Two threads claiming from one counter.
      std::atomic<size_t> next{0};
      std::vector<std::atomic<int>> hits(n);
      auto claim = [&] {
        size_t c = next.fetch_add(1);
        return c < chunks ? c : chunks;
      };
      auto count = [&](size_t i, const uint8_t*) { hits[i].fetch_add(1); };
      std::thread other([&] { gather_chunks(base.data(), idx.data(), n, per, claim, count); });
      gather_chunks(base.data(), idx.data(), n, per, claim, count);
      other.join();
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << per << " " << i;
    }
  }
}
