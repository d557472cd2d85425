// a2pack clean: remove the temporaries ("<out>.tmp-<pid>-<n>") that killed
// writers left beside their outputs (a2pack_clean_temps).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"

namespace a2cli {
namespace {

struct CleanArgs {
  std::vector<std::string> paths;
  bool json = false;
};

void print_removed(void*, const char* path) {
  status("removed {}\n", path);
}

void collect_removed(void* list, const char* path) {
  static_cast<nlohmann::json*>(list)->push_back(path);
}

void run_clean(const CleanArgs& a) {
  uint64_t total = 0;
  nlohmann::json removed = nlohmann::json::array();
  for (const auto& p : a.paths) {
    uint64_t n = 0;
    if (a.json)
      check(a2pack_clean_temps(p.c_str(), collect_removed, &removed, &n));
    else
      check(a2pack_clean_temps(p.c_str(), print_removed, nullptr, &n));
    total += n;
  }
  if (a.json) {
    nlohmann::json j = {{"paths", a.paths}, {"removed_count", total}, {"removed", removed}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  status("{} stale temporar{} removed\n", total, total == 1 ? "y" : "ies");
}

Registrar reg("clean", [](CLI::App& app) {
  auto a = std::make_shared<CleanArgs>();
  auto* c = app.add_subcommand(
      "clean",
      "Remove temporaries (OUT.tmp-PID-N) that killed writers left: of each output file "
      "given, or of every output in each folder given. Only files whose process is gone and "
      "that no writer holds are removed");
  c->add_option("paths", a->paths, "Output files or folders")->required();
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->callback([a] { run_clean(*a); });
});

}  // namespace
}  // namespace a2cli
