// a2pack decode: decode every run file of a folder into the columnar batch
// form and print a summary with the decode throughput.
#include <algorithm>
#include <fstream>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"

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

void finish(const DecodeArgs& a, const std::vector<Skipped>& skipped, uint64_t steps_mismatched) {
  if (a.strict && !skipped.empty())
    throw CliError(fmt::format("{} bad file(s) skipped; failing as --strict asks", skipped.size()));
  if (a.strict && steps_mismatched)
    throw CliError(fmt::format(
        "{} run(s) whose meta.steps disagrees with their steps (each named above); failing as "
        "--strict asks",
        steps_mismatched));
}

// Files are read and decoded in windows (the library reads each window's
// files on its workers) whose summary is added up and whose memory is then
// released. A window aims at kWindowBytes of files, small enough that a
// window's bytes are still in the cores' L2 caches when they are decoded
// right after being read; its file count is set from the mean size of the
// files read so far (their sizes come back with each batch, so listing the
// folder needs no stat per file). Peak memory is one window plus its
// columns, whatever the corpus.
constexpr size_t kFirstWindowFiles = 64;
constexpr size_t kMaxWindowFiles = 256;
constexpr uint64_t kWindowBytes = uint64_t{1} << 20;

struct Totals {
  uint64_t runs = 0, steps = 0, bytes = 0, with_branches = 0, max_len = 0, min_len = UINT64_MAX;
  std::map<uint32_t, uint64_t> tiles;
  double decode_s = 0;
  uint64_t steps_mismatched = 0;  // runs whose meta.steps is not their step count
};

using BatchPtr = std::unique_ptr<a2pack_run_batch, decltype(&a2pack_run_batch_close)>;

BatchPtr load(const std::vector<const char*>& paths, uint32_t workers, a2pack_status* st) {
  a2pack_run_batch* batch = nullptr;
  *st = a2pack_run_batch_load(paths.data(), paths.size(), workers, &batch);
  return BatchPtr(batch, a2pack_run_batch_close);
}

// `files` points into the folder's listing, which outlives the window.
void decode_window(const DecodeArgs& a, std::vector<const char*>& files, Totals& t,
                   const std::function<void(const std::string&, const std::string&)>& skip) {
  double t0 = now_seconds();
  a2pack_status st;
  BatchPtr batch = load(files, a.workers, &st);
  double dt = now_seconds() - t0;
  if (st != A2PACK_OK) {
    // The message names the first bad file. Without --skip-bad that is the
    // error; with it, try each file alone (only on this error path), report
    // and drop every bad one, and decode the rest.
    std::string batch_msg = a2pack_last_error();
    if (!a.skip_bad) throw CliError(batch_msg);
    std::vector<const char*> good;
    for (const char* f : files) {
      a2pack_run* run = nullptr;
      if (a2pack_run_load(f, &run) != A2PACK_OK) {
        std::string why = a2pack_last_error();
        // The library's message begins with the path; skip() names it again.
        const std::string prefix = std::string(f) + ": ";
        if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
        skip(f, why);
        continue;
      }
      a2pack_run_close(run);
      good.push_back(f);
    }
    if (good.size() == files.size()) throw CliError(batch_msg);
    files = std::move(good);
    t0 = now_seconds();
    batch = load(files, a.workers, &st);
    dt = now_seconds() - t0;
    check(st);
  }
  t.decode_s += dt;
  t.bytes += a2pack_run_batch_payload_bytes(batch.get());
  a2pack_run_columns c{};
  c.size = sizeof c;
  check(a2pack_run_batch_columns(batch.get(), &c));
  for (size_t r = 0; r < c.n_runs; ++r) {
    t.tiles[a2pack_board_highest_tile(c.final_boards[r])]++;
    uint64_t len = c.step_offsets[r + 1] - c.step_offsets[r];
    if (c.meta_steps[r] != len) {
      // Upstream decodes such a v2 run without a word; warn (--strict fails).
      ++t.steps_mismatched;
      // Under --strict it is part of the error, which -q does not silence.
      if (a.strict)
        fmt::print(stderr, "a2pack: error: {}: meta.steps {} but the run stores {} steps\n",
                   files[r], c.meta_steps[r], len);
      else
        status("a2pack: warning: {}: meta.steps {} but the run stores {} steps\n", files[r],
               c.meta_steps[r], len);
    }
    t.max_len = std::max(t.max_len, len);
    t.min_len = std::min(t.min_len, len);
  }
  // Summed in a local: a store to t through the loop would be reloaded after
  // every byte read (bytes may alias anything), and the loop not vectorised.
  uint64_t with_branches = 0;
  for (size_t s = 0; s < c.n_steps; ++s) with_branches += c.branch_present[s] != 0;
  t.with_branches += with_branches;
  t.runs += c.n_runs;
  t.steps += c.n_steps;
}

void run_decode(const DecodeArgs& a) {
  auto files = list_run_files(a.input, true);
  std::vector<Skipped> skipped;
  auto skip = [&](const std::string& file, const std::string& why) {
    if (!a.skip_bad) throw CliError(fmt::format("{}: {}", file, why));
    fmt::print(stderr, "a2pack: skipped {}: {}\n", file, why);
    skipped.push_back({file, why});
  };
  Totals t;
  uint64_t files_read = 0;
  for (size_t next = 0; next < files.size();) {
    size_t count = kFirstWindowFiles;
    if (files_read && t.bytes) {
      uint64_t mean = std::max<uint64_t>(1, t.bytes / files_read);
      count = static_cast<size_t>(std::clamp<uint64_t>(kWindowBytes / mean, 1, kMaxWindowFiles));
    }
    count = std::min(count, files.size() - next);
    std::vector<const char*> window(count);
    for (size_t i = 0; i < count; ++i) window[i] = files[next + i].c_str();
    next += count;
    decode_window(a, window, t, skip);
    files_read += window.size();
  }
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
    j["steps_mismatched"] = t.steps_mismatched;
    fmt::print("{}\n", j.dump(2));
    finish(a, skipped, t.steps_mismatched);
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
  if (!skipped.empty()) status("skipped {} bad file(s) (each named above)\n", skipped.size());
  finish(a, skipped, t.steps_mismatched);
}

Registrar reg("decode", [](CLI::App& app) {
  auto a = std::make_shared<DecodeArgs>();
  auto* c = app.add_subcommand("decode",
                               "Decode every .a2run2 under a folder and print a summary with throughput");
  add_input(c, a->input, "folder", "folder of runs", "Folder of .a2run2 files (searched recursively)");
  c->add_option("--workers,-j", a->workers, "Decode threads (0 = all cores)");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->add_flag("--skip-bad", a->skip_bad,
              "Skip unreadable or corrupt run files (each named on stderr, with why) instead of "
              "failing");
  c->add_flag("--strict", a->strict, "Exit non-zero when any file was skipped (--skip-bad) or a run's meta.steps disagrees with its steps");
  c->add_flag("-q,--quiet,--no-progress", globals().quiet, "Print only data and errors (no progress, status lines or warnings)");
  c->callback([a] { run_decode(*a); });
});

}  // namespace
}  // namespace a2cli
