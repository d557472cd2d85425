// a2pack_run_batch_export_arrow: a columnar run batch as an Arrow record
// batch, its step and run columns handed out as views of the batch (which the
// export holds, see a2pack_run_batch::refs).
#include "capi/arrow_c.hpp"
#include "capi/common.hpp"
#include "capi/handles.hpp"

using namespace a2pack;
using namespace a2pack::capi::arrow;
using a2pack::capi::guard;
using a2pack::capi::require;

namespace {

// The export's hold on the batch handle.
std::shared_ptr<const void> hold(const a2pack_run_batch* b) {
  capi::retain(b);
  return std::shared_ptr<const void>(b, [](const void* p) {
    capi::release(static_cast<const a2pack_run_batch*>(p));
  });
}

Batch steps(const a2pack_run_batch* h) {
  const run::Batch& b = h->batch;
  const size_t n = b.n_steps(), runs = b.n_runs();
  Batch out;
  out.owner = std::make_shared<Owner>();
  Owner& o = *out.owner;
  o.keep(hold(h));
  uint32_t* run_col = o.alloc<uint32_t>(n);
  uint32_t* step_col = o.alloc<uint32_t>(n);
  uint8_t* exps = o.alloc<uint8_t>(n * 16);
  for (size_t r = 0; r < runs; ++r)
    for (uint64_t s = b.step_offsets[r]; s < b.step_offsets[r + 1]; ++s) {
      run_col[s] = static_cast<uint32_t>(r);
      step_col[s] = static_cast<uint32_t>(s - b.step_offsets[r]);
    }
  for (size_t s = 0; s < n; ++s) {
    uint64_t board = b.boards[s];
    // Cell 0 (top-left) is the high nibble, as in the dataset's columns.
    for (int c = 0; c < 16; ++c)
      exps[s * 16 + c] = static_cast<uint8_t>((board >> (60 - 4 * c)) & 0xF);
  }
  const auto len = static_cast<int64_t>(n);
  out.length = len;
  out.columns.push_back(primitive("run", "I", len, run_col));
  out.columns.push_back(primitive("step", "I", len, step_col));
  out.columns.push_back(primitive("board", "L", len, b.boards.data()));
  out.columns.push_back(fixed_list("exponents", 16, len, primitive("", "C", len * 16, exps)));
  out.columns.push_back(primitive("move", "C", len, b.moves.data()));
  out.columns.push_back(primitive("legal_mask", "C", len, b.legal.data()));
  out.columns.push_back(fixed_list("ev_values", 4, len, primitive("", "f", len * 4, b.values.data())));
  out.columns.push_back(primitive("has_ev", "C", len, b.present.data()));
  return out;
}

Batch runs(const a2pack_run_batch* h) {
  const run::Batch& b = h->batch;
  const size_t n = b.n_runs();
  Batch out;
  out.owner = std::make_shared<Owner>();
  Owner& o = *out.owner;
  o.keep(hold(h));
  uint32_t* run_col = o.alloc<uint32_t>(n);
  for (size_t r = 0; r < n; ++r) run_col[r] = static_cast<uint32_t>(r);
  int64_t nulls = 0;
  const uint8_t* engine_valid = validity_from(o, b.has_engine.data(), n, &nulls);
  const auto len = static_cast<int64_t>(n);
  out.length = len;
  out.columns.push_back(primitive("run", "I", len, run_col));
  // step_offsets has n + 1 entries; the first n are each run's first step.
  out.columns.push_back(primitive("first_step", "L", len, b.step_offsets.data()));
  out.columns.push_back(primitive("num_steps", "I", len, b.meta_steps.data()));
  out.columns.push_back(primitive("final_board", "L", len, b.final_boards.data()));
  out.columns.push_back(primitive("max_score", "L", len, b.max_score.data()));
  out.columns.push_back(primitive("highest_tile", "I", len, b.highest_tile.data()));
  out.columns.push_back(primitive("start_unix_s", "L", len, b.start_unix_s.data()));
  out.columns.push_back(primitive("elapsed_s", "f", len, b.elapsed_s.data()));
  out.columns.push_back(primitive("source_kind", "C", len, b.source_kind.data()));
  // Engine offsets are uint64 byte offsets, far below 2^63: read as Arrow's
  // int64 large_utf8 offsets as they are.
  out.columns.push_back(large_bytes("engine", "U", len, engine_valid, nulls,
                                    reinterpret_cast<const int64_t*>(b.engine_offsets.data()),
                                    b.engine_bytes.data()));
  return out;
}

}  // namespace

namespace a2pack::capi::arrow {
Batch run_batch_columns(const a2pack_run_batch* h, int layout) {
  return layout == A2PACK_ARROW_STEPS ? steps(h) : runs(h);
}
}  // namespace a2pack::capi::arrow

A2PACK_EXPORT a2pack_status a2pack_run_batch_export_arrow(const a2pack_run_batch* batch,
                                                          a2pack_arrow_layout layout,
                                                          ArrowSchema* out_schema,
                                                          ArrowArray* out_array) {
  return guard([&] {
    require(batch, "batch");
    require_out(out_schema, out_array);
    long long l = capi::enum_int(layout);
    if (l != A2PACK_ARROW_STEPS && l != A2PACK_ARROW_RUNS)
      fail(A2PACK_E_INVALID_ARGUMENT, "layout is {}; expected A2PACK_ARROW_STEPS (0) or "
           "A2PACK_ARROW_RUNS (1)", l);
    export_batch(run_batch_columns(batch, static_cast<int>(l)), out_schema, out_array);
  });
}
