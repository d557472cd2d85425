// C ABI of the run section: run files and columnar batches.
#include "base/file_io.hpp"
#include "base/utf8.hpp"
#include "capi/common.hpp"
#include "capi/handles.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

namespace a2pack::capi {
void hand_out(run::Run&& r, a2pack_run** out) { *out = new a2pack_run{std::move(r)}; }
void hand_out(run::Batch&& b, a2pack_run_batch** out) { *out = new a2pack_run_batch{std::move(b)}; }
void retain(const a2pack_run_batch* b) {
  const_cast<a2pack_run_batch*>(b)->refs.fetch_add(1, std::memory_order_relaxed);
}
void release(const a2pack_run_batch* b) {
  auto* h = const_cast<a2pack_run_batch*>(b);
  if (h && h->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete h;
}
}  // namespace a2pack::capi

using a2pack::capi::reset_out;

A2PACK_EXPORT a2pack_run_kind a2pack_run_detect_kind(const uint8_t* data, size_t len) {
  if (!data) return A2PACK_RUN_V2;
  return static_cast<a2pack_run_kind>(run::detect_kind(data, len));
}

A2PACK_EXPORT a2pack_status a2pack_run_decode(const uint8_t* data, size_t len, a2pack_run** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    if (!data && len) require(data, "data");
    capi::hand_out(run::decode(data, len), out);
  });
}

A2PACK_EXPORT a2pack_status a2pack_run_load(const char* path, a2pack_run** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    require(path, "path");
    capi::hand_out(run::load(path), out);
  });
}

A2PACK_EXPORT a2pack_status a2pack_run_create(const a2pack_run_meta* meta, size_t n,
                                              const uint64_t* boards, const uint8_t* moves,
                                              const float* values, const uint8_t* legal_masks,
                                              const uint8_t* branch_present, uint64_t final_board,
                                              a2pack_run** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    require(meta, "meta");
    if (meta->size < offsetof(a2pack_run_meta, engine_len) + sizeof(size_t))
      fail(A2PACK_E_INVALID_ARGUMENT, "meta->size is {}; set it to sizeof(a2pack_run_meta)",
           meta->size);
    if (n) {
      require(boards, "boards");
      require(moves, "moves");
    }
    if ((values == nullptr) != (legal_masks == nullptr))
      fail(A2PACK_E_INVALID_ARGUMENT, "values and legal_masks must be both given or both NULL");
    if (branch_present && !values)
      fail(A2PACK_E_INVALID_ARGUMENT, "branch_present given without values");
    if (n > UINT32_MAX) fail(A2PACK_E_INVALID_ARGUMENT, "{} steps exceed the u32 limit", n);
    run::Run r;
    r.meta.steps = meta->steps;
    r.meta.start_unix_s = meta->start_unix_s;
    r.meta.elapsed_s = meta->elapsed_s;
    r.meta.max_score = meta->max_score;
    r.meta.highest_tile = meta->highest_tile;
    if (meta->has_engine) {
      if (meta->engine_len) require(meta->engine, "meta->engine");
      r.meta.engine.emplace(meta->engine ? meta->engine : "", meta->engine_len);
      if (!utf8::valid(r.meta.engine->data(), r.meta.engine->size()))
        fail(A2PACK_E_INVALID_ARGUMENT, "meta->engine is not valid UTF-8");
    }
    r.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (moves[i] > 3) fail(A2PACK_E_INVALID_ARGUMENT, "step {}: move {} out of range (0..3)", i, moves[i]);
      r.boards[i] = boards[i];
      r.moves[i] = moves[i];
      bool present = values && (!branch_present || branch_present[i]);
      r.present[i] = present;
      if (!present) continue;
      uint8_t mask = legal_masks[i] & 0xF;
      if (legal_masks[i] & 0xF0)
        fail(A2PACK_E_INVALID_ARGUMENT, "step {}: legal mask {:#x} has bits above the 4 moves", i,
             legal_masks[i]);
      r.legal[i] = mask;
      for (int k = 0; k < 4; ++k) r.values[4 * i + k] = (mask >> k & 1) ? values[4 * i + k] : 0.0f;
    }
    r.final_board = final_board;
    capi::hand_out(std::move(r), out);
  });
}

A2PACK_EXPORT void a2pack_run_close(a2pack_run* r) { delete r; }

A2PACK_EXPORT a2pack_run_kind a2pack_run_source_kind(const a2pack_run* r) {
  return r ? static_cast<a2pack_run_kind>(r->run.source) : A2PACK_RUN_KIND_UNKNOWN;
}

A2PACK_EXPORT a2pack_status a2pack_run_get_meta(const a2pack_run* r, a2pack_run_meta* out) {
  return guard([&] {
    require(r, "run");
    require(out, "out");
    const auto& m = r->run.meta;
    a2pack_run_meta full{};
    full.size = sizeof full;
    full.steps = m.steps;
    full.start_unix_s = m.start_unix_s;
    full.elapsed_s = m.elapsed_s;
    full.max_score = m.max_score;
    full.highest_tile = m.highest_tile;
    full.has_engine = m.engine.has_value();
    full.engine = m.engine ? m.engine->data() : nullptr;
    full.engine_len = m.engine ? m.engine->size() : 0;
    capi::write_out(out, full);
  });
}

A2PACK_EXPORT size_t a2pack_run_step_count(const a2pack_run* r) { return r ? r->run.size() : 0; }
A2PACK_EXPORT uint64_t a2pack_run_final_board(const a2pack_run* r) {
  return r ? r->run.final_board : 0;
}
A2PACK_EXPORT int32_t a2pack_run_has_branches(const a2pack_run* r) {
  return r && r->run.has_branches();
}

A2PACK_EXPORT a2pack_status a2pack_run_get_steps(const a2pack_run* r, size_t first, size_t n,
                                                 uint64_t* boards, uint8_t* moves, float* values,
                                                 uint8_t* legal, uint8_t* present) {
  return guard([&] {
    require(r, "run");
    const auto& x = r->run;
    if (first > x.size() || n > x.size() - first)
      fail(A2PACK_E_OUT_OF_RANGE, "steps [{}, {}) out of range: the run has {} steps", first,
           first + n, x.size());
    if (boards) std::memcpy(boards, x.boards.data() + first, 8 * n);
    if (moves) std::memcpy(moves, x.moves.data() + first, n);
    if (values) std::memcpy(values, x.values.data() + 4 * first, 16 * n);
    if (legal) std::memcpy(legal, x.legal.data() + first, n);
    if (present) std::memcpy(present, x.present.data() + first, n);
  });
}

namespace {
std::string encode(const run::Run& r, a2pack_run_kind kind, uint32_t flags) {
  if (flags & ~uint32_t{A2PACK_ENCODE_DROP_BRANCHES})
    fail(A2PACK_E_INVALID_ARGUMENT, "unknown encode flags {:#x}", flags);
  const long long k = capi::enum_int(kind);
  if (k == A2PACK_RUN_V2) return run::encode_v2(r);
  if (k == A2PACK_RUN_V1) return run::encode_v1(r, flags & A2PACK_ENCODE_DROP_BRANCHES);
  fail(A2PACK_E_INVALID_ARGUMENT, "kind must be A2PACK_RUN_V1 or A2PACK_RUN_V2, got {}", k);
}
}  // namespace

A2PACK_EXPORT a2pack_status a2pack_run_encode(const a2pack_run* r, a2pack_run_kind kind,
                                              uint32_t flags, uint8_t** out_data,
                                              size_t* out_len) {
  return capi::bytes_out(out_data, out_len, [&] {
    require(r, "run");
    return encode(r->run, kind, flags);
  });
}

A2PACK_EXPORT a2pack_status a2pack_run_save(const a2pack_run* r, const char* path,
                                            a2pack_run_kind kind, uint32_t flags) {
  return guard([&] {
    require(r, "run");
    require(path, "path");
    std::string bytes = encode(r->run, kind, flags);
    write_file_atomic(path, bytes.data(), bytes.size());
  });
}

A2PACK_EXPORT a2pack_status a2pack_run_upgrade_v1(const uint8_t* data, size_t len,
                                                  uint8_t** out_data, size_t* out_len) {
  if (out_data) *out_data = nullptr;
  if (out_len) *out_len = 0;
  return guard([&] {
    require(out_data, "out_data");
    require(out_len, "out_len");
    if (!data && len) require(data, "data");
    run::Run decoded = run::decode(data, len);  // validates either kind
    if (decoded.source == run::Kind::v2) {
      *out_data = capi::owned_copy(data, len);  // as documented: unchanged
      *out_len = len;
      return;
    }
    std::string bytes = run::encode_v2(decoded);
    *out_data = capi::owned_copy(bytes.data(), bytes.size());
    *out_len = bytes.size();
  });
}

A2PACK_EXPORT a2pack_status a2pack_run_batch_decode(const uint8_t* const* payloads,
                                                    const size_t* lengths, size_t n,
                                                    uint32_t workers, a2pack_run_batch** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    if (n) {
      require(payloads, "payloads");
      require(lengths, "lengths");
    }
    std::vector<run::Payload> p(n);
    for (size_t i = 0; i < n; ++i) {
      if (!payloads[i] && lengths[i]) fail(A2PACK_E_INVALID_ARGUMENT, "payloads[{}] is NULL", i);
      p[i] = {payloads[i], lengths[i]};
    }
    capi::hand_out(run::decode_batch(p.data(), n, workers), out);
  });
}

A2PACK_EXPORT a2pack_status a2pack_run_batch_load(const char* const* paths, size_t n,
                                                  uint32_t workers, a2pack_run_batch** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    if (n) require(paths, "paths");
    for (size_t i = 0; i < n; ++i)
      if (!paths[i]) fail(A2PACK_E_INVALID_ARGUMENT, "paths[{}] is NULL", i);
    capi::hand_out(run::load_batch(paths, n, workers), out);
  });
}

A2PACK_EXPORT uint64_t a2pack_run_batch_payload_bytes(const a2pack_run_batch* h) {
  return h ? h->batch.payload_bytes : 0;
}

A2PACK_EXPORT a2pack_status a2pack_run_batch_columns(const a2pack_run_batch* h,
                                                     a2pack_run_columns* out) {
  return guard([&] {
    require(h, "batch");
    require(out, "out");
    const auto& b = h->batch;
    a2pack_run_columns c{};
    c.size = sizeof c;
    c.n_runs = b.n_runs();
    c.n_steps = b.n_steps();
    c.step_offsets = b.step_offsets.data();
    c.boards = b.boards.data();
    c.moves = b.moves.data();
    c.branch_values = b.values.data();
    c.legal_masks = b.legal.data();
    c.branch_present = b.present.data();
    c.final_boards = b.final_boards.data();
    c.meta_steps = b.meta_steps.data();
    c.start_unix_s = b.start_unix_s.data();
    c.elapsed_s = b.elapsed_s.data();
    c.max_score = b.max_score.data();
    c.highest_tile = b.highest_tile.data();
    c.source_kind = b.source_kind.data();
    c.has_engine = b.has_engine.data();
    c.engine_offsets = b.engine_offsets.data();
    c.engine_bytes = b.engine_bytes.data();
    capi::write_out(out, c);
  });
}

A2PACK_EXPORT void a2pack_run_batch_close(a2pack_run_batch* b) { a2pack::capi::release(b); }
