// a2pack decode: decode every run file of a folder into the columnar batch
// form and print a summary with the decode throughput.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"

namespace fs = std::filesystem;

namespace a2cli {
namespace {

struct DecodeArgs {
  std::string input;
  uint32_t workers = 0;
  bool json = false;
  bool skip_bad = false;
  bool strict = false;
};

struct Skipped {
  std::string file, why;
};

std::vector<std::string> run_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  if (!fs::exists(dir, ec))  // a missing input is a system error, as in every command
    throw CliError(fmt::format("{}: no such folder", dir), kExitSystem);
  if (!fs::is_directory(dir, ec)) throw CliError(fmt::format("{}: not a folder", dir));
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".a2run2")
      files.push_back(it->path().string());
  if (ec) throw CliError(fmt::format("{}: {}", dir, ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw CliError("cannot open it");
  std::string s(std::istreambuf_iterator<char>(f), {});
  if (f.bad()) throw CliError("read error");
  return s;
}

void finish(const DecodeArgs& a, const std::vector<Skipped>& skipped) {
  if (a.strict && !skipped.empty())
    throw CliError(fmt::format("{} bad file(s) skipped; failing as --strict asks", skipped.size()));
}

// Files are read and decoded in windows of at most this many files and
// bytes, whose summary is added up and whose memory is then released: peak
// memory is one window (plus its decoded columns), whatever the corpus size.
constexpr size_t kWindowFiles = 256;
constexpr uint64_t kWindowBytes = uint64_t{64} << 20;

struct Totals {
  uint64_t runs = 0, steps = 0, bytes = 0, with_branches = 0, max_len = 0, min_len = UINT64_MAX;
  std::map<uint32_t, uint64_t> tiles;
  double decode_s = 0;
};

void decode_window(const DecodeArgs& a, std::vector<std::string>& data,
                   std::vector<std::string>& kept, Totals& t,
                   const std::function<void(const std::string&, const std::string&)>& skip) {
  std::vector<const uint8_t*> ptrs;
  std::vector<size_t> lens;
  auto lay_out = [&] {
    ptrs.clear();
    lens.clear();
    for (auto& d : data) {
      ptrs.push_back(reinterpret_cast<const uint8_t*>(d.data()));
      lens.push_back(d.size());
    }
  };
  lay_out();
  a2pack_run_batch* batch = nullptr;
  double t0 = now_seconds();
  a2pack_status st = a2pack_run_batch_decode(ptrs.data(), lens.data(), ptrs.size(), a.workers, &batch);
  double dt = now_seconds() - t0;
  if (st != A2PACK_OK) {
    // Name the file: decode the payloads one by one (only on this error
    // path); without --skip-bad report the first that fails, with its own
    // message; with it, report and drop every bad one and decode the rest.
    std::string batch_msg = a2pack_last_error();
    std::vector<std::string> good_data, good_files;
    for (size_t i = 0; i < kept.size(); ++i) {
      a2pack_run* run = nullptr;
      if (a2pack_run_decode(ptrs[i], lens[i], &run) != A2PACK_OK) {
        skip(kept[i], a2pack_last_error());
        continue;
      }
      a2pack_run_close(run);
      good_data.push_back(std::move(data[i]));
      good_files.push_back(kept[i]);
    }
    if (good_files.size() == kept.size()) throw CliError(batch_msg);
    data = std::move(good_data);
    kept = std::move(good_files);
    lay_out();
    t0 = now_seconds();
    check(a2pack_run_batch_decode(ptrs.data(), lens.data(), ptrs.size(), a.workers, &batch));
    dt = now_seconds() - t0;
  }
  t.decode_s += dt;
  for (auto& d : data) t.bytes += d.size();
  std::unique_ptr<a2pack_run_batch, decltype(&a2pack_run_batch_close)> guard(batch,
                                                                              a2pack_run_batch_close);
  a2pack_run_columns c{};
  c.size = sizeof c;
  check(a2pack_run_batch_columns(batch, &c));
  for (size_t r = 0; r < c.n_runs; ++r) {
    t.tiles[a2pack_board_highest_tile(c.final_boards[r])]++;
    uint64_t len = c.step_offsets[r + 1] - c.step_offsets[r];
    t.max_len = std::max(t.max_len, len);
    t.min_len = std::min(t.min_len, len);
  }
  for (size_t s = 0; s < c.n_steps; ++s) t.with_branches += c.branch_present[s];
  t.runs += c.n_runs;
  t.steps += c.n_steps;
}

void run_decode(const DecodeArgs& a) {
  auto files = run_files(a.input);
  std::vector<Skipped> skipped;
  auto skip = [&](const std::string& file, const std::string& why) {
    if (!a.skip_bad) throw CliError(fmt::format("{}: {}", file, why));
    fmt::print(stderr, "a2pack: skipped {}: {}\n", file, why);
    skipped.push_back({file, why});
  };
  Totals t;
  std::vector<std::string> data, kept;
  uint64_t window_bytes = 0;
  auto flush = [&] {
    if (!data.empty()) decode_window(a, data, kept, t, skip);
    std::vector<std::string>().swap(data);
    kept.clear();
    window_bytes = 0;
  };
  for (auto& f : files) {
    try {
      data.push_back(slurp(f));
      kept.push_back(f);
      window_bytes += data.back().size();
    } catch (const CliError& e) {
      skip(f, e.what());
    }
    if (data.size() >= kWindowFiles || window_bytes >= kWindowBytes) flush();
  }
  flush();
  if (t.runs == 0) t.min_len = 0;
  const double dt = t.decode_s;
  const uint64_t bytes = t.bytes, with_branches = t.with_branches, min_len = t.min_len,
                 max_len = t.max_len;
  const auto& tiles = t.tiles;
  struct {
    uint64_t n_runs, n_steps;
  } c{t.runs, t.steps};
  double mbps = dt > 0 ? static_cast<double>(bytes) / dt / 1e6 : 0;
  double sps = dt > 0 ? static_cast<double>(c.n_steps) / dt : 0;
  if (a.json) {
    nlohmann::json j;
    j["runs"] = c.n_runs;
    j["steps"] = c.n_steps;
    j["bytes"] = bytes;
    j["steps_with_branches"] = with_branches;
    j["min_len"] = min_len;
    j["max_len"] = max_len;
    nlohmann::json h = nlohmann::json::object();
    for (auto& [t, n] : tiles) h[std::to_string(t)] = n;
    j["highest_tile_hist"] = h;
    j["decode_seconds"] = dt;
    j["decode_mb_per_s"] = mbps;
    j["decode_steps_per_s"] = sps;
    nlohmann::json sk = nlohmann::json::array();
    for (auto& x : skipped) sk.push_back({{"file", x.file}, {"error", x.why}});
    j["skipped"] = sk;
    fmt::print("{}\n", j.dump(2));
    finish(a, skipped);
    return;
  }
  fmt::print("decoded {} runs, {} steps ({} with branches) from {} in {:.1f} ms\n", c.n_runs,
             c.n_steps, with_branches, human_bytes(static_cast<double>(bytes)), dt * 1e3);
  fmt::print("throughput    {:.0f} MB/s of run files, {:.1f} M steps/s\n", mbps, sps / 1e6);
  fmt::print("run length    min {} / mean {:.0f} / max {}\n", min_len,
             c.n_runs ? static_cast<double>(c.n_steps) / static_cast<double>(c.n_runs) : 0.0,
             max_len);
  fmt::print("highest tile ");
  for (auto& [t, n] : tiles) fmt::print(" {}:{}", t, n);
  fmt::print("\n");
  if (!skipped.empty()) fmt::print("skipped {} bad file(s) (each named above)\n", skipped.size());
  finish(a, skipped);
}

Registrar reg("decode", [](CLI::App& app) {
  auto a = std::make_shared<DecodeArgs>();
  auto* c = app.add_subcommand("decode",
                               "Decode every .a2run2 under a folder and print a summary with throughput");
  c->add_option("--input,-i", a->input, "Folder of .a2run2 files (searched recursively)")->required();
  c->add_option("--workers,-j", a->workers, "Decode threads (0 = all cores)");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->add_flag("--skip-bad", a->skip_bad,
              "Skip unreadable or corrupt run files (each named on stderr, with why) instead of "
              "failing");
  c->add_flag("--strict", a->strict, "With --skip-bad: exit non-zero when any file was skipped");
  c->add_flag("-q,--quiet,--no-progress", globals().quiet, "Print no progress bar");
  c->callback([a] { run_decode(*a); });
});

}  // namespace
}  // namespace a2cli
