// C ABI of the gen section: the 2048 engine and run generator.
#include "capi/common.hpp"
#include "capi/handles.hpp"
#include "engine/generator.hpp"
#include "engine/upstream.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

A2PACK_EXPORT void a2pack_gen_options_init(a2pack_gen_options* o) {
  if (!o) return;
  engine::GenOptions d;
  *o = a2pack_gen_options{};
  o->size = sizeof *o;
  o->policy = static_cast<a2pack_policy>(d.policy);
  o->depth = d.depth;
  o->format = static_cast<a2pack_run_kind>(d.format);
  o->jobs = d.jobs;
  o->start_unix_s = d.start_unix_s;
  o->max_steps = d.max_steps;
}

namespace {
engine::GenOptions convert(const a2pack_gen_options* user) {
  a2pack_gen_options o = capi::read_options(user, a2pack_gen_options_init);
  const long long policy = capi::enum_int(o.policy), format = capi::enum_int(o.format);
  if (policy < A2PACK_POLICY_EXPECTIMAX || policy > A2PACK_POLICY_RANDOM)
    fail(A2PACK_E_INVALID_ARGUMENT, "unknown policy {}", policy);
  if (o.depth < 1 || o.depth > 6)
    fail(A2PACK_E_INVALID_ARGUMENT, "depth {} out of range (1..6)", o.depth);
  if (format != A2PACK_RUN_V1 && format != A2PACK_RUN_V2)
    fail(A2PACK_E_INVALID_ARGUMENT, "format must be A2PACK_RUN_V1 or A2PACK_RUN_V2");
  engine::GenOptions g;
  g.policy = static_cast<engine::Policy>(policy);
  g.depth = o.depth;
  g.format = static_cast<run::Kind>(format);
  g.jobs = o.jobs;
  g.start_unix_s = o.start_unix_s;
  g.max_steps = o.max_steps;
  return g;
}
}  // namespace

A2PACK_EXPORT a2pack_status a2pack_gen_run(const a2pack_gen_options* opts, uint64_t seed,
                                           a2pack_run** out) {
  if (out) *out = nullptr;
  return guard([&] {
    require(out, "out");
    capi::hand_out(engine::play_game(convert(opts), seed), out);
  });
}

A2PACK_EXPORT a2pack_status a2pack_gen_dir(const a2pack_gen_options* opts, const char* dir,
                                           uint64_t n, uint64_t seed, a2pack_progress_fn progress,
                                           void* user) {
  return guard([&] {
    require(dir, "out_dir");
    engine::generate_dir(convert(opts), dir, n, seed, [&](uint64_t done, uint64_t total) {
      return !progress || progress(user, done, total) == 0;
    });
  });
}

// The upstream ai-2048 tool's expectimax (engine/upstream.hpp), for the
// ai_2048 Python module.
struct a2pack_expectimax {
  engine::upstream::Expectimax search;
};

A2PACK_EXPORT void a2pack_expectimax_options_init(a2pack_expectimax_options* o) {
  if (!o) return;
  engine::upstream::SearchConfig d;
  *o = a2pack_expectimax_options{};
  o->size = sizeof *o;
  o->prob_cutoff = d.prob_cutoff;
  o->has_depth_cap = d.has_depth_cap ? 1 : 0;
  o->depth_cap = d.depth_cap;
  o->cache_enabled = d.cache_enabled ? 1 : 0;
}

A2PACK_EXPORT a2pack_status a2pack_expectimax_open(const a2pack_expectimax_options* opts,
                                                   a2pack_expectimax** out) {
  capi::reset_out(out);
  return guard([&] {
    require(out, "out");
    const a2pack_expectimax_options o = capi::read_options(opts, a2pack_expectimax_options_init);
    engine::upstream::SearchConfig c;
    c.prob_cutoff = o.prob_cutoff;
    c.has_depth_cap = o.has_depth_cap != 0;
    c.depth_cap = o.depth_cap;
    c.cache_enabled = o.cache_enabled != 0;
    *out = new a2pack_expectimax{engine::upstream::Expectimax(c)};
  });
}

A2PACK_EXPORT void a2pack_expectimax_close(a2pack_expectimax* ex) { delete ex; }

A2PACK_EXPORT a2pack_status a2pack_expectimax_branch_evals(a2pack_expectimax* ex, uint64_t board,
                                                           double ev[4], uint32_t* legal_mask) {
  return guard([&] {
    require(ex, "ex");
    require(ev, "ev");
    const uint32_t legal = ex->search.branch_evals(board, ev);
    if (legal_mask) *legal_mask = legal;
  });
}

A2PACK_EXPORT a2pack_status a2pack_expectimax_best_move(a2pack_expectimax* ex, uint64_t board,
                                                        int32_t* move) {
  return guard([&] {
    require(ex, "ex");
    require(move, "move");
    *move = ex->search.best_move(board);
  });
}

A2PACK_EXPORT a2pack_status a2pack_expectimax_state_value(a2pack_expectimax* ex, uint64_t board,
                                                          double* value) {
  return guard([&] {
    require(ex, "ex");
    require(value, "value");
    *value = ex->search.state_value(board);
  });
}

A2PACK_EXPORT void a2pack_expectimax_stats(const a2pack_expectimax* ex, uint64_t* nodes,
                                           uint64_t* peak_nodes) {
  if (nodes) *nodes = ex ? ex->search.last_nodes() : 0;
  if (peak_nodes) *peak_nodes = ex ? ex->search.peak_nodes() : 0;
}

A2PACK_EXPORT void a2pack_expectimax_reset_stats(a2pack_expectimax* ex) {
  if (ex) ex->search.reset_stats();
}

// The one spelling of each verb (`<noun>_info_get`, `_state_save`, `_state_load`,
// `_stats_get`); the first names stay as aliases.
A2PACK_EXPORT void a2pack_expectimax_stats_get(const a2pack_expectimax* ex, uint64_t *nodes,
                                               uint64_t *peak_nodes) {
  a2pack_expectimax_stats(ex, nodes, peak_nodes);
}

A2PACK_EXPORT void a2pack_expectimax_stats_reset(a2pack_expectimax *ex) {
  a2pack_expectimax_reset_stats(ex);
}
