// The arrow section of the C API through the shared library and a2pack.h
// only: schemas and arrays as the Arrow C Data Interface spec lays them out,
// zero-copy where documented (same addresses as the handle's columns),
// exports that outlive their handles, consumers moving children out, streams,
// and argument errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "a2pack.h"
#include "capi_test_util.hpp"

namespace {

std::string tmpdir() {
  char tmpl[] = "/tmp/a2pack-capi-arrow-XXXXXX";
  return mkdtemp(tmpl);
}

struct WorkDir {
  std::string path;
  ~WorkDir() { std::filesystem::remove_all(path); }
};

// Generated runs, a pack of them and a dataset built from the pack, once.
const std::string& workdir() {
  static WorkDir dir{[] {
    std::string d = tmpdir();
    a2pack_gen_options g;
    a2pack_gen_options_init(&g);
    g.policy = A2PACK_POLICY_GREEDY;
    g.max_steps = 80;
    g.jobs = 2;
    EXPECT_EQ(a2pack_gen_dir(&g, (d + "/runs").c_str(), 9, 3, nullptr, nullptr), A2PACK_OK);
    EXPECT_EQ(a2pack_pack_dir((d + "/runs").c_str(), (d + "/p.a2pack").c_str(), nullptr, nullptr,
                              nullptr, nullptr),
              A2PACK_OK)
        << a2pack_last_error();
    EXPECT_EQ(a2pack_dataset_build((d + "/p.a2pack").c_str(), (d + "/ds").c_str(), nullptr, nullptr),
              A2PACK_OK)
        << a2pack_last_error();
    return d;
  }()};
  return dir.path;
}

// Owns an exported schema/array pair; releases what is still held.
struct Export {
  ArrowSchema schema{};
  ArrowArray array{};
  ~Export() {
    if (array.release) array.release(&array);
    if (schema.release) schema.release(&schema);
  }
  int child(const char* name) const {
    for (int64_t i = 0; i < schema.n_children; ++i)
      if (std::strcmp(schema.children[i]->name, name) == 0) return static_cast<int>(i);
    ADD_FAILURE() << "no column " << name;
    return 0;
  }
  const char* format(const char* name) const { return schema.children[child(name)]->format; }
  const ArrowArray* col(const char* name) const { return array.children[child(name)]; }
  template <typename T>
  const T* data(const char* name) const {
    return static_cast<const T*>(col(name)->buffers[1]);
  }
};

a2pack_run_batch* fixture_batch(int copies) {
  static std::vector<uint8_t> bytes = capitest::fixture_bytes();
  std::vector<const uint8_t*> p(copies, bytes.data());
  std::vector<size_t> l(copies, bytes.size());
  a2pack_run_batch* b = nullptr;
  EXPECT_EQ(a2pack_run_batch_decode(p.data(), l.data(), copies, 1, &b), A2PACK_OK);
  return b;
}

TEST(CapiArrow, RunBatchStepsAreZeroCopyViews) {
  a2pack_run_batch* b = fixture_batch(2);
  a2pack_run_columns c{};
  c.size = sizeof c;
  ASSERT_EQ(a2pack_run_batch_columns(b, &c), A2PACK_OK);
  Export e;
  ASSERT_EQ(a2pack_run_batch_export_arrow(b, A2PACK_ARROW_STEPS, &e.schema, &e.array), A2PACK_OK)
      << a2pack_last_error();
  EXPECT_STREQ(e.schema.format, "+s");
  EXPECT_EQ(e.array.length, static_cast<int64_t>(c.n_steps));
  EXPECT_EQ(e.array.n_buffers, 1);
  EXPECT_STREQ(e.format("board"), "L");
  EXPECT_STREQ(e.format("exponents"), "+w:16");
  EXPECT_STREQ(e.format("ev_values"), "+w:4");
  EXPECT_STREQ(e.schema.children[e.child("ev_values")]->children[0]->format, "f");
  // Zero-copy: the very arrays of a2pack_run_batch_columns.
  EXPECT_EQ(e.data<uint64_t>("board"), c.boards);
  EXPECT_EQ(e.data<uint8_t>("move"), c.moves);
  EXPECT_EQ(e.data<uint8_t>("legal_mask"), c.legal_masks);
  EXPECT_EQ(e.col("ev_values")->children[0]->buffers[1], static_cast<const void*>(c.branch_values));
  EXPECT_EQ(e.col("ev_values")->children[0]->length, static_cast<int64_t>(c.n_steps * 4));
  // Computed columns agree with the views.
  const uint8_t* exps = static_cast<const uint8_t*>(e.col("exponents")->children[0]->buffers[1]);
  const uint32_t* run = e.data<uint32_t>("run");
  const uint32_t* step = e.data<uint32_t>("step");
  for (size_t s = 0; s < c.n_steps; ++s) {
    uint64_t board = 0;
    for (int k = 0; k < 16; ++k) board = (board << 4) | exps[s * 16 + k];
    ASSERT_EQ(board, c.boards[s]) << "step " << s;
    uint32_t r = s < c.step_offsets[1] ? 0 : 1;
    ASSERT_EQ(run[s], r);
    ASSERT_EQ(step[s], s - c.step_offsets[r]);
  }
  a2pack_run_batch_close(b);
}

TEST(CapiArrow, ExportOutlivesTheBatchAndChildrenMayBeMovedOut) {
  a2pack_run_batch* b = fixture_batch(1);
  a2pack_run_columns c{};
  c.size = sizeof c;
  ASSERT_EQ(a2pack_run_batch_columns(b, &c), A2PACK_OK);
  std::vector<uint64_t> boards(c.boards, c.boards + c.n_steps);
  Export e;
  ASSERT_EQ(a2pack_run_batch_export_arrow(b, A2PACK_ARROW_STEPS, &e.schema, &e.array), A2PACK_OK);
  a2pack_run_batch_close(b);  // the export still holds the batch
  // A consumer may move a child out and release the parent first (spec).
  ArrowArray board = *e.array.children[e.child("board")];
  e.array.children[e.child("board")]->release = nullptr;
  e.array.release(&e.array);
  EXPECT_EQ(e.array.release, nullptr);
  const uint64_t* v = static_cast<const uint64_t*>(board.buffers[1]);
  for (size_t s = 0; s < boards.size(); ++s) ASSERT_EQ(v[s], boards[s]);
  board.release(&board);  // the last holder: frees the batch
  EXPECT_EQ(board.release, nullptr);
}

TEST(CapiArrow, RunBatchRunsLayout) {
  a2pack_run_batch* b = fixture_batch(3);
  a2pack_run_columns c{};
  c.size = sizeof c;
  ASSERT_EQ(a2pack_run_batch_columns(b, &c), A2PACK_OK);
  Export e;
  ASSERT_EQ(a2pack_run_batch_export_arrow(b, A2PACK_ARROW_RUNS, &e.schema, &e.array), A2PACK_OK);
  EXPECT_EQ(e.array.length, 3);
  EXPECT_EQ(e.data<uint64_t>("max_score"), c.max_score);
  EXPECT_EQ(e.data<uint64_t>("first_step"), c.step_offsets);
  EXPECT_STREQ(e.format("engine"), "U");
  const ArrowArray* eng = e.col("engine");
  EXPECT_EQ(eng->n_buffers, 3);
  int64_t nulls = 0;
  for (size_t r = 0; r < 3; ++r) nulls += c.has_engine[r] ? 0 : 1;
  EXPECT_EQ(eng->null_count, nulls);
  EXPECT_EQ(e.schema.children[e.child("engine")]->flags & ARROW_FLAG_NULLABLE, ARROW_FLAG_NULLABLE);
  a2pack_run_batch_close(b);
}

TEST(CapiArrow, DatasetGatherIsACopyEqualToTheRows) {
  a2pack_dataset* ds = nullptr;
  ASSERT_EQ(a2pack_dataset_open((workdir() + "/ds").c_str(), nullptr, &ds), A2PACK_OK)
      << a2pack_last_error();
  a2pack_dataset_info info{};
  info.size = sizeof info;
  ASSERT_EQ(a2pack_dataset_get_info(ds, &info), A2PACK_OK);
  std::vector<int64_t> idx = {3, 0, static_cast<int64_t>(info.rows) - 1, 3};
  Export e;
  ASSERT_EQ(a2pack_dataset_export_arrow(ds, idx.data(), idx.size(), 1, &e.schema, &e.array),
            A2PACK_OK)
      << a2pack_last_error();
  a2pack_dataset_close(ds);  // one copy: nothing refers to the dataset
  EXPECT_EQ(e.array.length, 4);
  EXPECT_STREQ(e.format("step_index"), "S");
  // Rows are 32 bytes: board u64 at 0, move at 8, ev_legal at 9, run_id at 26.
  std::vector<uint8_t> rows;
  {
    a2pack_dataset* d2 = nullptr;
    ASSERT_EQ(a2pack_dataset_open((workdir() + "/ds").c_str(), nullptr, &d2), A2PACK_OK);
    rows.resize(idx.size() * 32);
    ASSERT_EQ(a2pack_dataset_gather(d2, idx.data(), idx.size(), rows.data(), 1), A2PACK_OK);
    a2pack_dataset_close(d2);
  }
  for (size_t i = 0; i < idx.size(); ++i) {
    uint64_t board;
    uint32_t run_id;
    std::memcpy(&board, &rows[i * 32], 8);
    std::memcpy(&run_id, &rows[i * 32 + 26], 4);
    EXPECT_EQ(e.data<uint64_t>("board")[i], board);
    EXPECT_EQ(e.data<uint8_t>("move")[i], rows[i * 32 + 8]);
    EXPECT_EQ(e.data<uint8_t>("legal_mask")[i], rows[i * 32 + 9]);
    EXPECT_EQ(e.data<uint32_t>("run_id")[i], run_id);
  }
}

TEST(CapiArrow, DatasetStreamOutlivesTheHandle) {
  a2pack_dataset* ds = nullptr;
  ASSERT_EQ(a2pack_dataset_open((workdir() + "/ds").c_str(), nullptr, &ds), A2PACK_OK);
  a2pack_dataset_info info{};
  info.size = sizeof info;
  ASSERT_EQ(a2pack_dataset_get_info(ds, &info), A2PACK_OK);
  std::vector<uint64_t> boards(info.rows);
  for (uint64_t i = 0; i < info.rows; ++i) std::memcpy(&boards[i], info.data + 32 * i, 8);
  ArrowArrayStream st{};
  ASSERT_EQ(a2pack_dataset_export_arrow_stream(ds, nullptr, 0, 50, 1, &st), A2PACK_OK);
  a2pack_dataset_close(ds);
  ArrowSchema s{};
  ASSERT_EQ(st.get_schema(&st, &s), 0);
  EXPECT_EQ(s.n_children, 7);
  s.release(&s);
  uint64_t seen = 0;
  int batches = 0;
  for (;;) {
    ArrowArray a{};
    ASSERT_EQ(st.get_next(&st, &a), 0);
    if (!a.release) break;
    ++batches;
    EXPECT_LE(a.length, 50);
    const uint64_t* b = static_cast<const uint64_t*>(a.children[0]->buffers[1]);
    for (int64_t i = 0; i < a.length; ++i) ASSERT_EQ(b[i], boards[seen + i]);
    seen += a.length;
    a.release(&a);
  }
  EXPECT_EQ(seen, info.rows);
  EXPECT_EQ(batches, static_cast<int>((info.rows + 49) / 50));
  ArrowArray end{};
  EXPECT_EQ(st.get_next(&st, &end), 0);  // still "no more"
  EXPECT_EQ(end.release, nullptr);
  st.release(&st);
  EXPECT_EQ(st.release, nullptr);
}

TEST(CapiArrow, DatasetErrorsNameTheIndex) {
  a2pack_dataset* ds = nullptr;
  ASSERT_EQ(a2pack_dataset_open((workdir() + "/ds").c_str(), nullptr, &ds), A2PACK_OK);
  int64_t bad[] = {0, 1 << 30};
  Export e;
  EXPECT_EQ(a2pack_dataset_export_arrow(ds, bad, 2, 1, &e.schema, &e.array), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(e.schema.release, nullptr);
  EXPECT_EQ(e.array.release, nullptr);
  ArrowArrayStream st{};
  EXPECT_EQ(a2pack_dataset_export_arrow_stream(ds, bad, 2, 0, 1, &st), A2PACK_E_OUT_OF_RANGE);
  EXPECT_NE(std::string(a2pack_last_error()).find("idx[1]"), std::string::npos)
      << a2pack_last_error();
  EXPECT_EQ(st.release, nullptr);
  EXPECT_EQ(a2pack_dataset_export_arrow(nullptr, bad, 1, 1, &e.schema, &e.array),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_dataset_export_arrow(ds, bad, 1, 1, nullptr, &e.array), A2PACK_E_INVALID_ARGUMENT);
  a2pack_dataset_close(ds);
}

TEST(CapiArrow, PackEntriesAndStats) {
  a2pack_pack* p = nullptr;
  ASSERT_EQ(a2pack_pack_open((workdir() + "/p.a2pack").c_str(), nullptr, &p), A2PACK_OK);
  Export e;
  ASSERT_EQ(a2pack_pack_export_arrow_entries(p, &e.schema, &e.array), A2PACK_OK);
  EXPECT_EQ(e.array.length, static_cast<int64_t>(a2pack_pack_len(p)));
  for (uint64_t i = 0; i < a2pack_pack_len(p); ++i) {
    a2pack_pack_entry en{};
    en.size = sizeof en;
    ASSERT_EQ(a2pack_pack_entry_info(p, i, &en), A2PACK_OK);
    EXPECT_EQ(e.data<uint64_t>("offset")[i], en.offset);
    EXPECT_EQ(e.data<uint32_t>("length")[i], en.length);
    EXPECT_EQ(e.data<uint64_t>("entry")[i], i);
  }
  Export s, h;
  ASSERT_EQ(a2pack_pack_export_arrow_stats(p, 1, &s.schema, &s.array, &h.schema, &h.array),
            A2PACK_OK);
  a2pack_pack_close(p);
  EXPECT_EQ(s.array.length, 1);
  EXPECT_EQ(s.data<uint64_t>("count")[0], 9u);
  EXPECT_STREQ(s.format("from_block"), "b");
  uint64_t runs = 0;
  for (int64_t i = 0; i < h.array.length; ++i) runs += h.data<uint64_t>("runs")[i];
  EXPECT_EQ(runs, 9u);
  Export only;
  ASSERT_EQ(a2pack_pack_open((workdir() + "/p.a2pack").c_str(), nullptr, &p), A2PACK_OK);
  EXPECT_EQ(a2pack_pack_export_arrow_stats(p, 1, &only.schema, &only.array, &h.schema, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_pack_export_arrow_stats(p, 1, &only.schema, &only.array, nullptr, nullptr),
            A2PACK_OK);
  a2pack_pack_close(p);
}

TEST(CapiArrow, PackStreamOutlivesTheHandle) {
  a2pack_pack* p = nullptr;
  ASSERT_EQ(a2pack_pack_open((workdir() + "/p.a2pack").c_str(), nullptr, &p), A2PACK_OK);
  uint64_t pick[] = {7, 2, 5};
  a2pack_run_batch* want = nullptr;
  ASSERT_EQ(a2pack_pack_decode_batch(p, pick, 3, 1, 0, &want), A2PACK_OK);
  a2pack_run_columns c{};
  c.size = sizeof c;
  ASSERT_EQ(a2pack_run_batch_columns(want, &c), A2PACK_OK);
  ArrowArrayStream st{};
  ASSERT_EQ(a2pack_pack_export_arrow_stream(p, A2PACK_ARROW_STEPS, pick, 3, 2, 1, 0, &st),
            A2PACK_OK)
      << a2pack_last_error();
  a2pack_pack_close(p);  // the stream holds the file
  ArrowSchema s{};
  ASSERT_EQ(st.get_schema(&st, &s), 0);
  EXPECT_STREQ(s.children[0]->name, "entry");
  EXPECT_STREQ(s.children[0]->format, "L");
  s.release(&s);
  size_t seen = 0;
  std::vector<int64_t> lengths;
  for (;;) {
    ArrowArray a{};
    ASSERT_EQ(st.get_next(&st, &a), 0) << st.get_last_error(&st);
    if (!a.release) break;
    lengths.push_back(a.length);
    const uint64_t* entry = static_cast<const uint64_t*>(a.children[0]->buffers[1]);
    const uint64_t* board = static_cast<const uint64_t*>(a.children[2]->buffers[1]);  // entry, step, board
    for (int64_t i = 0; i < a.length; ++i, ++seen) {
      ASSERT_EQ(board[i], c.boards[seen]);
      size_t r = 0;
      while (seen >= c.step_offsets[r + 1]) ++r;
      ASSERT_EQ(entry[i], pick[r]);
    }
    a.release(&a);
  }
  EXPECT_EQ(seen, c.n_steps);
  EXPECT_EQ(lengths.size(), 2u);  // 3 entries, 2 per batch
  st.release(&st);
  a2pack_run_batch_close(want);

  ASSERT_EQ(a2pack_pack_open((workdir() + "/p.a2pack").c_str(), nullptr, &p), A2PACK_OK);
  uint64_t bad[] = {0, 99};
  ArrowArrayStream none{};
  EXPECT_EQ(a2pack_pack_export_arrow_stream(p, A2PACK_ARROW_RUNS, bad, 2, 0, 1, 0, &none),
            A2PACK_E_OUT_OF_RANGE);
  EXPECT_NE(std::string(a2pack_last_error()).find("entries[1] = 99"), std::string::npos);
  EXPECT_EQ(none.release, nullptr);
  EXPECT_EQ(a2pack_pack_export_arrow_stream(p, A2PACK_ARROW_RUNS, nullptr, 0, 0, 1, 8, &none),
            A2PACK_E_INVALID_ARGUMENT);
  ASSERT_EQ(a2pack_pack_export_arrow_stream(p, A2PACK_ARROW_RUNS, nullptr, 0, 4, 1, 0, &none),
            A2PACK_OK);
  int64_t rows = 0;
  for (;;) {
    ArrowArray a{};
    ASSERT_EQ(none.get_next(&none, &a), 0);
    if (!a.release) break;
    rows += a.length;
    a.release(&a);
  }
  EXPECT_EQ(rows, static_cast<int64_t>(a2pack_pack_len(p)));
  none.release(&none);
  a2pack_pack_close(p);
}

TEST(CapiArrow, BagBatchIsTakenZeroCopy) {
  std::string dir = tmpdir();
  std::string path = dir + "/r.bag";
  a2pack_bag_writer* w = nullptr;
  ASSERT_EQ(a2pack_bag_writer_open(path.c_str(), nullptr, &w), A2PACK_OK) << a2pack_last_error();
  std::vector<std::string> recs = {"", "a", "hello", std::string(1000, 'x')};
  for (auto& r : recs)
    ASSERT_EQ(a2pack_bag_writer_write(w, reinterpret_cast<const uint8_t*>(r.data()), r.size()),
              A2PACK_OK);
  ASSERT_EQ(a2pack_bag_writer_commit(w), A2PACK_OK);
  a2pack_bag_writer_close(w);
  a2pack_bag_reader* r = nullptr;
  ASSERT_EQ(a2pack_bag_reader_open(path.c_str(), nullptr, &r), A2PACK_OK) << a2pack_last_error();
  a2pack_bag_batch* b = nullptr;
  ASSERT_EQ(a2pack_bag_reader_read_range(r, 0, recs.size(), 1, &b), A2PACK_OK);
  const uint8_t* data = nullptr;
  a2pack_bag_batch_view(b, &data, nullptr, nullptr);
  Export e;
  ASSERT_EQ(a2pack_bag_batch_export_arrow(b, &e.schema, &e.array), A2PACK_OK);  // takes b
  a2pack_bag_reader_close(r);
  EXPECT_STREQ(e.format("record"), "Z");
  const ArrowArray* col = e.col("record");
  EXPECT_EQ(col->buffers[2], static_cast<const void*>(data));
  const int64_t* off = static_cast<const int64_t*>(col->buffers[1]);
  for (size_t i = 0; i < recs.size(); ++i)
    EXPECT_EQ(std::string(static_cast<const char*>(col->buffers[2]) + off[i], off[i + 1] - off[i]),
              recs[i]);
  EXPECT_EQ(a2pack_bag_batch_export_arrow(nullptr, &e.schema, &e.array), A2PACK_E_INVALID_ARGUMENT);
  std::filesystem::remove_all(dir);
}

TEST(CapiArrow, LoggerDataIsCopied) {
  std::string dir = tmpdir() + "/log";
  a2pack_logger* lg = nullptr;
  ASSERT_EQ(a2pack_logger_open(dir.c_str(), nullptr, &lg), A2PACK_OK) << a2pack_last_error();
  uint32_t sid = 0;
  ASSERT_EQ(a2pack_logger_register_stream(lg, nullptr, 1.0, 0.5, 0, &sid), A2PACK_OK);
  uint32_t idx[] = {1, 4};
  double val[] = {2.0, -3.5};
  for (int e = 0; e < 5; ++e) ASSERT_EQ(a2pack_logger_record(lg, sid, e, idx, val, 2), A2PACK_OK);
  ASSERT_EQ(a2pack_logger_close(lg), A2PACK_OK);
  a2pack_logger_data* d = nullptr;
  ASSERT_EQ(a2pack_logger_decode(dir.c_str(), nullptr, &d), A2PACK_OK) << a2pack_last_error();
  Export e;
  ASSERT_EQ(a2pack_logger_data_export_arrow(d, &e.schema, &e.array), A2PACK_OK);
  a2pack_logger_data_close(d);
  EXPECT_EQ(e.array.length, 5);
  EXPECT_STREQ(e.format("indices"), "+L");
  const ArrowArray* values = e.col("values")->children[0];
  EXPECT_EQ(values->length, 10);
  EXPECT_EQ(static_cast<const double*>(values->buffers[1])[1], -3.5);
  EXPECT_EQ(static_cast<const double*>(e.col("epoch")->buffers[1])[4], 4.0);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST(CapiArrow, BadLayoutAndApiTable) {
  a2pack_run_batch* b = fixture_batch(1);
  Export e;
  // A C caller may pass any int as the layout. C++ cannot hold 7 in the
  // enum without undefined behaviour (UBSan reports the load), so the call
  // goes through the same function typed with int, as the C ABI passes it.
  using ExportAsInt = a2pack_status (*)(const a2pack_run_batch*, int, ArrowSchema*, ArrowArray*);
  auto export_as_int = reinterpret_cast<ExportAsInt>(&a2pack_run_batch_export_arrow);
  EXPECT_EQ(export_as_int(b, 7, &e.schema, &e.array), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(e.schema.release, nullptr);
  a2pack_run_batch_close(b);
  const a2pack_api_table* api = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(api->arrow, nullptr);
  EXPECT_EQ(api->arrow->size, sizeof(a2pack_arrow_api));
  EXPECT_EQ(api->arrow->run_batch_export, &a2pack_run_batch_export_arrow);
  EXPECT_EQ(api->arrow->logger_data_export, &a2pack_logger_data_export_arrow);
  EXPECT_EQ(api->arrow->pack_export_stream, &a2pack_pack_export_arrow_stream);
}

}  // namespace
