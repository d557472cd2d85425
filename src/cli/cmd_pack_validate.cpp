// a2pack validate: check a packfile's structure, and with --full every entry.
#include <fmt/format.h>

#include "command.hpp"
#include "pack_util.hpp"

namespace a2cli {
namespace {

struct ValidateArgs {
  std::string packfile;
  bool full = false;
  uint32_t workers = 0;
};

void run_validate(const ValidateArgs& a) {
  PackPtr p = open_pack(a.packfile);
  Progress bar("validate", a.full);
  double t0 = now_seconds();
  check(a2pack_pack_validate(p.get(), a.full, a.workers, &Progress::callback, &bar));
  bar.finish();
  fmt::print("OK: {} ({} runs, {} check, {:.2f}s)\n", a.packfile, a2pack_pack_len(p.get()),
             a.full ? "full" : "quick", now_seconds() - t0);
}

Registrar reg("validate", [](CLI::App& app) {
  auto a = std::make_shared<ValidateArgs>();
  auto* c = app.add_subcommand("validate", "Check a packfile (header, index, footer, CRCs)");
  c->add_option("--packfile", a->packfile, "Packfile")->required();
  c->add_flag("--full", a->full, "Check every entry's CRC and decode it, and all padding");
  c->add_option("--workers,-j", a->workers, "Threads (0 = all cores)");
  c->add_flag("-q,--quiet,--no-progress", globals().quiet, "Print no progress bar");
  c->callback([a] { run_validate(*a); });
});

}  // namespace
}  // namespace a2cli
