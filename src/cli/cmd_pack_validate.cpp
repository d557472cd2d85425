// a2pack validate: check a packfile's structure, and with --full every entry.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "pack_util.hpp"

namespace a2cli {
namespace {

struct ValidateArgs {
  std::string packfile;
  bool full = false;
  uint32_t workers = 0;
  bool json = false;
};

void run_validate(const ValidateArgs& a) {
  PackPtr p = open_pack(a.packfile);
  Progress bar("validate", a.full);
  double t0 = now_seconds();
  check(a2pack_pack_validate(p.get(), a.full, a.workers, &Progress::callback, &bar));
  bar.finish();
  double dt = now_seconds() - t0;
  if (a.json) {
    // Only a pack that passed gets here: a failed check is an error on
    // stderr with exit status 1, like the text form.
    nlohmann::json j = {{"packfile", a.packfile},
                        {"ok", true},
                        {"runs", a2pack_pack_len(p.get())},
                        {"check", a.full ? "full" : "quick"},
                        {"seconds", dt}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  status("OK: {} ({} runs, {} check, {:.2f}s)\n", a.packfile, a2pack_pack_len(p.get()),
             a.full ? "full" : "quick", dt);
}

Registrar reg("validate", [](CLI::App& app) {
  auto a = std::make_shared<ValidateArgs>();
  auto* c = app.add_subcommand("validate", "Check a packfile (header, index, footer, CRCs)");
  c->add_option("--packfile", a->packfile, "Packfile")->required();
  c->add_flag("--full", a->full, "Check every entry's CRC and decode it, and all padding");
  c->add_option("--workers,-j", a->workers, "Threads (0 = all cores)");
  c->add_flag("-q,--quiet,--no-progress", globals().quiet, "Print only data and errors (no progress, status lines or warnings)");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->callback([a] { run_validate(*a); });
});

}  // namespace
}  // namespace a2cli
