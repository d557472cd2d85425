// a2pack gen: play games and write them as run files.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"

namespace a2cli {
namespace {

struct GenArgs {
  uint64_t runs = 0;
  std::string out;
  uint64_t seed = 0;
  std::string format = "v2";
  std::string policy = "expectimax";
  uint32_t depth = 2;
  uint32_t jobs = 0;
  uint32_t max_steps = 0;
  bool json = false;
};

void run_gen(const GenArgs& a) {
  a2pack_gen_options o;
  a2pack_gen_options_init(&o);
  o.format = a.format == "v1" ? A2PACK_RUN_V1 : A2PACK_RUN_V2;
  o.policy = a.policy == "greedy"   ? A2PACK_POLICY_GREEDY
             : a.policy == "random" ? A2PACK_POLICY_RANDOM
                                    : A2PACK_POLICY_EXPECTIMAX;
  o.depth = a.depth;
  o.jobs = a.jobs;
  o.max_steps = a.max_steps;
  Progress bar("gen");
  double t0 = now_seconds();
  check(a2pack_gen_dir(&o, a.out.c_str(), a.runs, a.seed, &Progress::callback, &bar));
  bar.finish();
  double dt = now_seconds() - t0;
  double rate = dt > 0 ? static_cast<double>(a.runs) / dt : 0.0;
  if (a.json) {
    nlohmann::json j = {{"runs", a.runs}, {"output", a.out},   {"seed", a.seed},
                        {"format", a.format}, {"policy", a.policy}, {"seconds", dt},
                        {"runs_per_s", rate}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  status("wrote {} runs to {} in {:.2f}s ({:.1f} runs/s)\n", a.runs, a.out, dt, rate);
}

Registrar reg("gen", [](CLI::App& app) {
  auto a = std::make_shared<GenArgs>();
  auto* c = app.add_subcommand("gen", "Play 2048 games and write them as .a2run2 files");
  c->add_option("--runs,-n", a->runs, "Number of games")->required();
  c->add_option("--output,-o", a->out, "Output folder (created if missing)")->required();
  c->add_option("--seed,-s", a->seed, "Master seed; same arguments give the same bytes");
  choices(c->add_option("--format", a->format, "Run file format"), {"v1", "v2"});
  choices(c->add_option("--policy", a->policy, "Move policy"), {"expectimax", "greedy", "random"});
  complete_values(
      c->add_option("--depth", a->depth, "Expectimax search depth in moves")->check(CLI::Range(1, 6)),
      {"1", "2", "3", "4", "5", "6"});
  c->add_option("--workers,-j", a->jobs, "Worker threads (0 = all cores)");
  c->add_option("--max-steps", a->max_steps, "Stop each game after this many moves (0 = never)");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->callback([a] { run_gen(*a); });
});

}  // namespace
}  // namespace a2cli
