// a2pack to-jsonl: export a packfile as JSONL (one line per run or per step).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "pack_util.hpp"

namespace a2cli {
namespace {

struct JsonlArgs {
  std::string packfile, output;
  bool steps = false;
  bool runs = false;
  uint32_t workers = 0;
  bool no_verify = false;
  bool parallel = true;
  bool durable = false;
  bool json = false;
};

void run_jsonl(const JsonlArgs& a) {
  if (a.steps && a.runs) throw UsageError("to-jsonl: give --steps or --runs, not both");
  PackPtr p = open_pack(a.packfile);
  Progress bar("to-jsonl");
  uint64_t bytes = 0;
  double t0 = now_seconds();
  check(a2pack_pack_to_jsonl(p.get(), a.output.c_str(),
                             a.steps ? A2PACK_PACK_JSONL_STEPS : A2PACK_PACK_JSONL_RUNS,
                             a.parallel ? a.workers : 1,
                             (a.no_verify ? A2PACK_PACK_NO_VERIFY : 0) |
                                 (a.durable ? A2PACK_PACK_DURABLE : 0),
                             &Progress::callback, &bar,
                             &bytes));
  bar.finish();
  double dt = now_seconds() - t0;
  if (a.json) {
    nlohmann::json j = {{"packfile", a.packfile},
                        {"output", a.output},
                        {"runs", a2pack_pack_len(p.get())},
                        {"layout", a.steps ? "steps" : "runs"},
                        {"bytes", bytes},
                        {"seconds", dt}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  status("wrote {} runs as {} JSONL to {}: {} in {:.2f}s ({}/s)\n", a2pack_pack_len(p.get()),
             a.steps ? "per-step" : "per-run", a.output, human_bytes(static_cast<double>(bytes)), dt,
             human_bytes(dt > 0 ? static_cast<double>(bytes) / dt : 0.0));
}

Registrar reg("to-jsonl", [](CLI::App& app) {
  auto a = std::make_shared<JsonlArgs>();
  auto* c = app.add_subcommand("to-jsonl", "Export a packfile as JSONL (upstream's schema)");
  add_input(c, a->packfile, "packfile", "packfile", "Packfile", "--packfile");
  c->add_option("--output,-o", a->output, "JSONL file to write (atomically)")->required();
  c->add_flag("--steps,--by-step", a->steps, "One line per step (--by-step: upstream's name)");
  c->add_flag("--runs", a->runs, "One line per run (the default)");
  c->add_option("--workers,-j", a->workers, "Threads (0 = all cores); output is the same for any");
  // Upstream's --parallel (on by default there too): work is always parallel
  // here unless --workers 1; --parallel=false means one worker.
  c->add_flag("--parallel", a->parallel,
              "Decode in parallel (the default; upstream's flag, --parallel=false = --workers 1)");
  c->add_flag("--no-verify", a->no_verify, "Skip entry CRC checks (trusted packs)");
  c->add_flag("--durable", a->durable,
              "fsync the output before it is renamed into place (survives a power cut)");
  c->add_flag("-q,--quiet,--no-progress", globals().quiet, "Print only data and errors (no progress, status lines or warnings)");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->callback([a] { run_jsonl(*a); });
});

}  // namespace
}  // namespace a2cli
