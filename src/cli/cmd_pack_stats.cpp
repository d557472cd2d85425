// a2pack stats: a packfile's run-length statistics and histograms.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "pack_util.hpp"

namespace a2cli {
namespace {

struct StatsArgs {
  std::string packfile;
  bool json = false;
  uint32_t workers = 0;
};

void run_stats(const StatsArgs& a) {
  PackPtr p = open_pack(a.packfile);
  a2pack_pack_stats s{};
  s.size = sizeof s;
  check(a2pack_pack_stats_get(p.get(), a.workers, &s));
  a2pack_pack_histograms h{};
  h.size = sizeof h;
  check(a2pack_pack_histograms_get(p.get(), a.workers, &h));
  auto engine = [&](size_t k) {
    return std::string(h.engine_bytes + h.engine_offsets[k],
                       h.engine_offsets[k + 1] - h.engine_offsets[k]);
  };
  if (a.json) {
    nlohmann::ordered_json j;
    j["packfile"] = a.packfile;
    j["count"] = s.count;
    j["total_steps"] = s.total_steps;
    j["min_len"] = s.min_len;
    j["max_len"] = s.max_len;
    j["mean_len"] = s.mean_len;
    j["p50"] = s.p50;
    j["p90"] = s.p90;
    j["p99"] = s.p99;
    j["from_stats_block"] = s.from_block != 0;
    auto tiles = nlohmann::ordered_json::object();
    for (size_t k = 0; k < h.n_tiles; ++k) tiles[std::to_string(h.tile_values[k])] = h.tile_counts[k];
    j["highest_tile_hist"] = tiles;
    // A list of [engine, count]: null stands for runs that store no engine.
    auto engines = nlohmann::ordered_json::array();
    for (size_t k = 0; k < h.n_engines; ++k)
      engines.push_back({h.engine_present[k] ? nlohmann::ordered_json(engine(k)) : nullptr,
                         h.engine_counts[k]});
    j["engine_counts"] = engines;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("packfile: {}\n", a.packfile);
  fmt::print("runs: {}\n", s.count);
  fmt::print("total_steps: {}\n", s.total_steps);
  fmt::print("min_len: {}\n", s.min_len);
  fmt::print("max_len: {}\n", s.max_len);
  fmt::print("mean_len: {:.3f}\n", s.mean_len);
  fmt::print("p50/p90/p99: {} / {} / {}\n", s.p50, s.p90, s.p99);
  fmt::print("source: {}\n", s.from_block ? "stats block" : "computed from the runs");
  fmt::print("highest tile:\n");
  for (size_t k = 0; k < h.n_tiles; ++k)
    fmt::print("  {:>8}  {}\n", h.tile_values[k], h.tile_counts[k]);
  fmt::print("engines:\n");
  for (size_t k = 0; k < h.n_engines; ++k)
    fmt::print("  {}  {}\n", h.engine_present[k] ? "\"" + engine(k) + "\"" : "(none)",
               h.engine_counts[k]);
}

Registrar reg("stats", [](CLI::App& app) {
  auto a = std::make_shared<StatsArgs>();
  auto* c = app.add_subcommand("stats", "Print a packfile's statistics");
  add_input(c, a->packfile, "packfile", "packfile", "Packfile", "--packfile");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->add_option("--workers,-j", a->workers, "Threads for the histograms (0 = all cores)");
  c->callback([a] { run_stats(*a); });
});

}  // namespace
}  // namespace a2cli
