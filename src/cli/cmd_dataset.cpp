// a2pack dataset build|append|stats|verify: step datasets (steps.npy +
// metadata.db + manifest.json) for training.
#include <sys/stat.h>

#include <cerrno>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "command.hpp"

namespace a2cli {
namespace {

struct DatasetArgs {
  std::string input;
  std::string out;
  std::string dataset;
  uint32_t workers = 0;
  bool allow_missing_branches = false;
  bool overwrite = false;
  bool json = false;
  bool repair = false;
  bool full = false;
  bool discard_unrecorded = false;
  bool skip_bad = false;
  bool strict = false;
  double lock_timeout_s = 60;
  bool copy_steps = false;
  uint64_t shard_rows = 0;
  bool allow_duplicates = false;
  bool progress = false;  // upstream's `dataset build --progress`: the bar is on by default here
  bool allow_extra_files = false;
};

// The library's refusal of a file a dataset does not hold names its option
// (`allow_extra_files`, as the C and Python interfaces spell it); here it
// names what this tool has instead: `instead`.
constexpr const char kExtraFileAdvice[] = ", or open with allow_extra_files";

std::string cli_advice(std::string message, const std::string& instead) {
  for (size_t at; (at = message.find(kExtraFileAdvice)) != std::string::npos;)
    message.replace(at, sizeof kExtraFileAdvice - 1, instead);
  return message;
}

void report_bad(void* /*user*/, const char* label, a2pack_status status, const char* message) {
  print_skipped(label, status, message);
}

void print_warning(void* /*user*/, const char* message) {
  status("a2pack: warning: {}\n", message);
}

// What a build or an append did besides its work (leftover folders of dead
// builds, recovery): printed as notes, and listed in the --json summary.
void print_note(void* user, const char* message) {
  static_cast<std::vector<std::string>*>(user)->push_back(message);
  status("a2pack: note: {}\n", message);
}

struct OwnedString {
  char* p = nullptr;
  ~OwnedString() { a2pack_free(p); }
};

a2pack_dataset_build_options build_options(const DatasetArgs& a, Progress& bar,
                                           std::vector<std::string>& notes) {
  a2pack_dataset_build_options o;
  a2pack_dataset_build_options_init(&o);
  o.workers = a.workers;
  o.allow_missing_branches = a.allow_missing_branches;
  o.overwrite = a.overwrite;
  o.progress = &Progress::callback;
  o.progress_user = &bar;
  o.on_warning = &print_warning;
  o.on_note = &print_note;
  o.on_note_user = &notes;
  o.skip_bad = a.skip_bad;
  o.on_bad_input = &report_bad;
  o.lock_timeout_ms = a.lock_timeout_s < 0 ? -1 : static_cast<int64_t>(a.lock_timeout_s * 1000);
  o.copy_steps = a.copy_steps;
  o.shard_rows = a.shard_rows;
  o.allow_duplicates = a.allow_duplicates;
  return o;
}

void print_result(const char* verb, const a2pack_dataset_build_result& r, double secs,
                  const DatasetArgs& a, const std::vector<std::string>& notes) {
  if (a.json) {
    nlohmann::json j = {{"input", a.input},
                        {"dataset", a.out.empty() ? a.dataset : a.out},
                        {"runs_added", r.runs_added},
                        {"rows_added", r.rows_added},
                        {"runs_skipped", r.runs_skipped},
                        {"runs_duplicated", r.runs_duplicated},
                        {"total_runs", r.total_runs},
                        {"total_rows", r.total_rows},
                        {"seconds", secs},
                        {"notes", notes}};
    if (!a.dataset.empty()) j["steps_copied"] = r.steps_copied != 0;
    fmt::print("{}\n", j.dump(2));
    std::fflush(stdout);
  } else {
    status("{} {} runs, {} rows ({}) in {:.2f}s; the dataset now holds {} runs, {} rows\n",
               verb, r.runs_added, r.rows_added, human_bytes(static_cast<double>(r.rows_added) * 32),
               secs,
               r.total_runs, r.total_rows);
  }
  if (r.runs_duplicated && !a.json)
    status("wrote {} run(s) that repeat another run (--allow-duplicates); `dataset verify` "
           "notes them\n",
           r.runs_duplicated);
  if (r.runs_skipped) {
    if (!a.json) status("skipped {} bad run(s) (each named above)\n", r.runs_skipped);
    if (a.strict)
      throw CliError(fmt::format("{} bad run(s) skipped; failing as --strict asks (the good runs "
                                 "were written)",
                                 r.runs_skipped));
  }
}

void run_build(const DatasetArgs& a) {
  Progress bar("build");
  std::vector<std::string> notes;
  auto o = build_options(a, bar, notes);
  a2pack_dataset_build_result r{};
  r.size = sizeof r;
  double t0 = now_seconds();
  check(a2pack_dataset_build(a.input.c_str(), a.out.c_str(), &o, &r));
  bar.finish();
  print_result("built", r, now_seconds() - t0, a, notes);
}

void run_append(const DatasetArgs& a) {
  Progress bar("append");
  std::vector<std::string> notes;
  auto o = build_options(a, bar, notes);
  a2pack_dataset_build_result r{};
  r.size = sizeof r;
  double t0 = now_seconds();
  check(a2pack_dataset_append(a.dataset.c_str(), a.input.c_str(), &o, &r));
  bar.finish();
  print_result("appended", r, now_seconds() - t0, a, notes);
  if (r.steps_copied && !a.json && !a.copy_steps)
    status("note: steps.npy was copied rather than extended: its header was not a2pack's (it "
           "is now, so the next append extends it in place), or another hard link shares the "
           "file\n");
}

void run_stats(const DatasetArgs& a) {
  a2pack_dataset_open_options o;
  a2pack_dataset_open_options_init(&o);
  o.workers = a.workers;
  o.allow_extra_files = a.allow_extra_files;
  a2pack_dataset* ds = nullptr;
  double t0 = now_seconds();
  if (a2pack_status st = a2pack_dataset_open(a.dataset.c_str(), &o, &ds); st != A2PACK_OK)
    throw CliError(cli_advice(a2pack_last_error(), ", or pass --allow-extra-files"),
                   exit_code_for(st));
  double load_s = now_seconds() - t0;
  std::unique_ptr<a2pack_dataset, decltype(&a2pack_dataset_close)> guard(ds, a2pack_dataset_close);
  OwnedString js;
  check(a2pack_dataset_stats_json(ds, a.workers, &js.p));
  auto j = nlohmann::json::parse(js.p);
  j["load_seconds"] = load_s;
  if (a.json) {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  uint64_t rows = j["rows"];
  fmt::print("dataset   {}\n", j["path"].get<std::string>());
  fmt::print("rows      {} ({}), loaded and checked in {:.3f}s\n", rows,
             human_bytes(static_cast<double>(rows) * 32), load_s);
  fmt::print("runs      {} (next run id {})\n", j["runs"].get<uint64_t>(),
             j["next_run_id"].get<uint64_t>());
  if (j["has_manifest"].get<bool>())
    fmt::print("manifest  crc32c {}, created {}, updated {}, {} source(s)\n",
               j["steps_crc32c"].get<std::string>(), j["created"].get<std::string>(),
               j["updated"].get<std::string>(), j["sources"].get<uint64_t>());
  else
    fmt::print("manifest  none (upstream dataset)\n");
  if (j["uncommitted_rows"].get<uint64_t>())
    fmt::print("note      {} uncommitted rows (interrupted append) are ignored\n",
               j["uncommitted_rows"].get<uint64_t>());
  const auto& rs = j["run_steps"];
  fmt::print("run steps min {} / mean {:.1f} / max {}\n", rs["min"].get<int64_t>(),
             rs["mean"].get<double>(), rs["max"].get<int64_t>());
  const auto& ms = j["max_score"];
  fmt::print("max score min {} / mean {:.1f} / max {}\n", ms["min"].get<int64_t>(),
             ms["mean"].get<double>(), ms["max"].get<int64_t>());
  std::vector<std::pair<uint64_t, uint64_t>> tile_counts;  // JSON keys sort as text
  for (auto& [k, v] : j["highest_tile"].items()) tile_counts.emplace_back(std::stoull(k), v.get<uint64_t>());
  std::sort(tile_counts.begin(), tile_counts.end());
  std::string tiles;
  for (auto [t, c] : tile_counts) tiles += fmt::format(" {}:{}", t, c);
  fmt::print("top tile {}\n", tiles);
  std::string engines;
  for (auto& [k, v] : j["engines"].items()) engines += fmt::format(" {}:{}", k, v.get<uint64_t>());
  fmt::print("engines  {}\n", engines);
  const auto& mv = j["moves"];
  auto pct = [&](uint64_t x) { return rows ? 100.0 * static_cast<double>(x) / static_cast<double>(rows) : 0.0; };
  fmt::print("moves     up {:.1f}% down {:.1f}% left {:.1f}% right {:.1f}%\n",
             pct(mv["up"].get<uint64_t>()), pct(mv["down"].get<uint64_t>()),
             pct(mv["left"].get<uint64_t>()), pct(mv["right"].get<uint64_t>()));
  std::string legal;
  for (auto& [k, v] : j["legal_moves"].items()) legal += fmt::format(" {}:{:.1f}%", k, pct(v.get<uint64_t>()));
  fmt::print("legal moves per step{}\n", legal);
}

void run_verify(const DatasetArgs& a) {
  OwnedString js;
  double t0 = now_seconds();
  if (a.discard_unrecorded && !a.repair)
    throw UsageError("--discard-unrecorded needs --repair (it deletes the runs and rows it names)");
  uint32_t flags = (a.repair ? A2PACK_DATASET_VERIFY_REPAIR : 0) |
                   (a.full ? A2PACK_DATASET_VERIFY_FULL : 0) |
                   (a.discard_unrecorded ? A2PACK_DATASET_VERIFY_DISCARD_UNRECORDED : 0);
  a2pack_status st = a2pack_dataset_verify(a.dataset.c_str(), flags, a.workers, &js.p);
  double secs = now_seconds() - t0;
  if (!js.p) check(st);  // failed before a report existed (bad arguments)
  auto j = nlohmann::json::parse(js.p);
  // verify reads every file of the folder: an extra one fails it, whatever
  // `dataset stats --allow-extra-files` reads past.
  if (j.contains("errors"))
    for (auto& e : j["errors"])
      e = cli_advice(e.get<std::string>(),
                     " (`a2pack dataset stats --allow-extra-files` reads the dataset despite it)");
  if (a.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    for (const auto& s : j["actions"]) status("repaired: {}\n", s.get<std::string>());
    for (const auto& s : j["notes"]) status("note: {}\n", s.get<std::string>());
    if (j.contains("warnings"))
      for (const auto& s : j["warnings"]) status("warning: {}\n", s.get<std::string>());
    for (const auto& s : j["errors"]) fmt::print(stderr, "error: {}\n", s.get<std::string>());
    if (st == A2PACK_OK)
      status("ok: {} rows in {} runs verified in {:.2f}s\n", j["rows"].get<uint64_t>(),
                 j["runs"].get<uint64_t>(), secs);
  }
  if (st != A2PACK_OK) {
    // A dataset folder that is not there is a missing input (3), as in every
    // command; anything verify found in an existing one is a data problem (1).
    struct stat sb;
    bool missing = ::stat(a.dataset.c_str(), &sb) != 0 && errno == ENOENT;
    throw CliError(fmt::format("{}: verification failed", a.dataset),
                   missing ? kExitSystem : kExitDataProblem);
  }
}

// Flags build and append share.
void add_writer_flags(CLI::App* c, DatasetArgs& a) {
  c->add_flag("--skip-bad", a.skip_bad,
              "Skip unreadable or corrupt runs (each named on stderr, with why) instead of failing");
  c->add_flag("--strict", a.strict, "With --skip-bad: exit non-zero when any run was skipped");
  c->add_flag("--allow-duplicates", a.allow_duplicates,
              "Write runs that repeat a run of the dataset or of this input (the same content "
              "digest: boards, moves and metadata); without it such runs are refused, naming "
              "them, and nothing is changed");
  c->add_option("--lock-timeout", a.lock_timeout_s,
                "Seconds to wait for readers loading the dataset (or another writer) to release "
                "its lock; -1 = no limit, 0 = fail at once (default 60)");
  c->add_flag("-q,--quiet,--no-progress", globals().quiet, "Print only data and errors (no progress, status lines or warnings)");
  c->add_flag("--json", a.json, "Print the summary as JSON (docs/cli.md)");
  // Upstream's `dataset build --progress`: a2pack draws the bar by default
  // (on a terminal), so the flag is accepted and changes nothing.
  c->add_flag("--progress", a.progress, "")->group("");
}

Registrar reg("dataset", [](CLI::App& app) {
  auto* g = app.add_subcommand("dataset", "Step datasets: steps.npy + metadata.db + manifest.json");
  g->require_subcommand(1);

  auto b = std::make_shared<DatasetArgs>();
  auto* c = g->add_subcommand("build", "Build a dataset from run files");
  add_input(c, b->input, "input", "folder of runs or packfile",
            "Folder of .a2run2 files, or a .a2pack packfile");
  c->add_option("--output,-o", b->out, "Dataset folder to create")->required();
  c->add_option("--workers,-j", b->workers, "Decode threads (0 = all cores)");
  c->add_flag("--allow-missing-branches", b->allow_missing_branches,
              "Accept runs without branch values: only the chosen move is legal, at 1.0");
  c->add_flag("--overwrite", b->overwrite, "Replace an existing dataset folder (atomically)");
  c->add_option("--shard-rows", b->shard_rows,
                "Write the sharded layout: shards of whole runs of at most N rows (32 N bytes) "
                "instead of one steps.npy, for datasets larger than RAM (docs/dataset.md)");
  add_writer_flags(c, *b);
  c->callback([b] { run_build(*b); });

  auto p = std::make_shared<DatasetArgs>();
  c = g->add_subcommand("append",
                        "Add runs to a dataset (atomically). Writes only the new rows, steps.npy's "
                        "header and the new runs of metadata.db: the cost grows with the new runs, "
                        "not the dataset");
  c->add_option("--dataset,-d", p->dataset, "Dataset folder")->required();
  add_input(c, p->input, "input", "folder of runs or packfile",
            "Folder of .a2run2 files, or a .a2pack packfile, to add");
  c->add_option("--workers,-j", p->workers, "Decode threads (0 = all cores)");
  c->add_flag("--allow-missing-branches", p->allow_missing_branches,
              "Accept runs without branch values: only the chosen move is legal, at 1.0");
  c->add_flag("--copy", p->copy_steps,
              "Write a new steps.npy (the old rows copied, then renamed into place) instead of "
              "extending it: costs a copy of the whole file; for folders that programs other "
              "than a2pack read while appending (they keep the old file)");
  c->add_option("--shard-rows", p->shard_rows,
                "Sharded dataset: the new shards' size in rows (default: the dataset's). An "
                "append to a sharded dataset writes new shards only, never an existing one");
  add_writer_flags(c, *p);
  c->callback([p] { run_append(*p); });

  auto s = std::make_shared<DatasetArgs>();
  c = g->add_subcommand("stats", "Load a dataset and print its statistics");
  add_input(c, s->dataset, "dataset", "dataset folder", "Dataset folder", "-d,--dataset");
  c->add_option("--workers,-j", s->workers, "Threads (0 = all cores)");
  c->add_flag("--allow-extra-files", s->allow_extra_files,
              "Read the dataset although its folder holds files a dataset does not (notes, "
              "other tools' output) instead of refusing it");
  c->add_flag("--json", s->json, "Print the summary as JSON (docs/cli.md)");
  c->callback([s] { run_stats(*s); });

  auto v = std::make_shared<DatasetArgs>();
  c = g->add_subcommand("verify", "Check a dataset completely (CRC, counts, every row)");
  add_input(c, v->dataset, "dataset", "dataset folder", "Dataset folder", "-d,--dataset");
  c->add_option("--workers,-j", v->workers, "Threads (0 = all cores)");
  c->add_flag("--repair", v->repair,
              "First undo what an interrupted append of a2pack left (as its journal records), "
              "record runs another tool appended in the manifest, and record the runs' content "
              "digests where missing or wrong (datasets written before a2pack recorded them)");
  c->add_flag("--full", v->full, "SQLite integrity_check instead of quick_check on metadata.db");
  c->add_flag("--discard-unrecorded", v->discard_unrecorded,
              "With --repair: delete runs/rows the manifest does not record that cannot be "
              "adopted (they do not fit the rows); without it repair refuses, naming them");
  c->add_flag("--json", v->json, "Print the report as JSON (docs/cli.md)");
  c->callback([v] { run_verify(*v); });
});

}  // namespace
}  // namespace a2cli
