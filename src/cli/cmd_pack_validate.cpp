// a2pack validate: check a packfile's structure, and with --full every entry.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>
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
  bool strict = false;
};

// --strict: entries whose meta.steps disagrees with the steps they store
// (upstream decodes such v2 runs without a word, so only --strict fails
// them). The entries the check covered: all with --full, else the 16 that
// the quick check decodes (spread over the pack). Entries have passed
// validation by now, so the CRCs are not checked again.
void check_meta_steps(a2pack_pack* p, const ValidateArgs& a) {
  const uint64_t n = a2pack_pack_len(p);
  std::vector<uint64_t> todo;
  if (a.full) {
    for (uint64_t i = 0; i < n; ++i) todo.push_back(i);
  } else {
    const uint64_t m = std::min<uint64_t>(n, 16);
    for (uint64_t k = 0; k < m; ++k) todo.push_back(m == 1 ? 0 : k * (n - 1) / (m - 1));
  }
  std::vector<std::string> bad;
  uint64_t count = 0;
  constexpr size_t kWave = 1024;
  for (size_t first = 0; first < todo.size(); first += kWave) {
    const size_t w = std::min(kWave, todo.size() - first);
    a2pack_run_batch* raw = nullptr;
    check(a2pack_pack_decode_batch(p, todo.data() + first, w, a.workers, A2PACK_PACK_NO_VERIFY, &raw));
    std::unique_ptr<a2pack_run_batch, decltype(&a2pack_run_batch_close)> b(raw, a2pack_run_batch_close);
    a2pack_run_columns c{};
    c.size = sizeof c;
    check(a2pack_run_batch_columns(b.get(), &c));
    for (size_t r = 0; r < c.n_runs; ++r) {
      const uint64_t len = c.step_offsets[r + 1] - c.step_offsets[r];
      if (c.meta_steps[r] == len) continue;
      if (++count <= 10)
        bad.push_back(fmt::format("entry {}: meta.steps {} but the run stores {} steps",
                                  todo[first + r], c.meta_steps[r], len));
    }
  }
  if (!count) return;
  std::string msg = fmt::format("{}: {} entr{} whose meta.steps disagrees with its steps:",
                                a.packfile, count, count == 1 ? "y" : "ies");
  for (auto& line : bad) msg += "\n  " + line;
  if (count > bad.size()) msg += fmt::format("\n  ... and {} more", count - bad.size());
  throw CliError(msg + "\n(failing as --strict asks)");
}

void run_validate(const ValidateArgs& a) {
  PackPtr p = open_pack(a.packfile);
  Progress bar("validate", a.full);
  double t0 = now_seconds();
  check(a2pack_pack_validate(p.get(), a.full, a.workers, &Progress::callback, &bar));
  bar.finish();
  if (a.strict) check_meta_steps(p.get(), a);
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
  add_input(c, a->packfile, "packfile", "packfile", "Packfile", "--packfile");
  c->add_flag("--full", a->full, "Check every entry's CRC and decode it, and all padding");
  c->add_option("--workers,-j", a->workers, "Threads (0 = all cores)");
  c->add_flag("-q,--quiet,--no-progress", globals().quiet, "Print only data and errors (no progress, status lines or warnings)");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->add_flag("--strict", a->strict,
              "Also fail on entries whose meta.steps disagrees with their steps (all entries "
              "with --full, else the sampled ones)");
  c->callback([a] { run_validate(*a); });
});

}  // namespace
}  // namespace a2cli
