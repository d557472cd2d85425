// a2pack inspect: print one run (a run file, or later a packfile entry).
#include <fmt/format.h>

#include "command.hpp"
#include "run_view.hpp"

namespace a2cli {
namespace {

struct InspectArgs {
  std::string run_path;
  bool json = false;
};

void print_run(const a2pack_run* run, bool json) {
  if (json)
    fmt::print("{}\n", run_summary_json(run).dump(2));
  else
    fmt::print("{}", run_summary_text(run));
}

void run_inspect(const InspectArgs& a) {
  if (a.run_path.empty()) throw CliError("inspect needs --run FILE");
  a2pack_run* run = nullptr;
  check(a2pack_run_load(a.run_path.c_str(), &run));
  std::unique_ptr<a2pack_run, decltype(&a2pack_run_close)> guard(run, a2pack_run_close);
  print_run(run, a.json);
}

Registrar reg("inspect", [](CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  auto* c = app.add_subcommand("inspect", "Print a run's metadata, counts and first/last boards");
  c->add_option("--run", a->run_path, "A .a2run2 file (v1 or v2)")->check(CLI::ExistingFile);
  c->add_flag("--json", a->json, "Print JSON instead of text");
  c->callback([a] { run_inspect(*a); });
});

}  // namespace
}  // namespace a2cli
