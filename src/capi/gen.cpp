// C ABI of the gen section: the 2048 engine and run generator.
#include "capi/common.hpp"
#include "capi/handles.hpp"
#include "engine/generator.hpp"

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
