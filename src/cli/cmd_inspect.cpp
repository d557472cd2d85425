// a2pack inspect: print one run, from a run file (--run) or a packfile entry
// (--packfile F --index I).
//
// The packfile functions are called through the api table, so this shared
// command links and runs in builds without the pack capability (it then says
// so instead of failing to link).
#include <fmt/format.h>

#include "command.hpp"
#include "run_view.hpp"

namespace a2cli {
namespace {

struct InspectArgs {
  std::string run_path;
  std::string packfile;
  int64_t index = -1;
  bool json = false;
  bool strict = false;
};

using RunPtr = std::unique_ptr<a2pack_run, decltype(&a2pack_run_close)>;

// A run whose meta.steps disagrees with its steps: a warning, or with
// --strict an error (exit status 1) before anything is printed.
void check_steps(const a2pack_run* run, const std::string& where, bool strict) {
  std::string why = steps_mismatch(run);
  if (why.empty()) return;
  if (strict) throw CliError(fmt::format("{}: {}; failing as --strict asks", where, why));
  status("a2pack: warning: {}: {}\n", where, why);
}

void print_run(const a2pack_run* run, bool json) {
  if (json)
    fmt::print("{}\n", run_summary_json(run).dump(2));
  else
    fmt::print("{}", run_summary_text(run));
}

void inspect_entry(const InspectArgs& a) {
  if (a.index < 0) throw UsageError("inspect --packfile needs --index I");
  const a2pack_pack_api* api = a2pack_api(A2PACK_ABI_VERSION)->pack;
  if (!api) throw CliError("this a2pack build has no packfile support");
  const uint64_t i = static_cast<uint64_t>(a.index);
  a2pack_pack* raw_pack = nullptr;
  check(api->open(a.packfile.c_str(), nullptr, &raw_pack));
  std::unique_ptr<a2pack_pack, void (*)(a2pack_pack*)> p(raw_pack, api->close);
  a2pack_pack_entry e{};
  e.size = sizeof e;
  check(api->entry_info(p.get(), i, &e));
  a2pack_run* raw = nullptr;
  check(api->decode(p.get(), i, 0, &raw));
  RunPtr run(raw, a2pack_run_close);
  check_steps(run.get(), fmt::format("{}: entry {}", a.packfile, i), a.strict);
  const char* storage = e.flags == A2PACK_PACK_ENTRY_ZSTD  ? "zstd"
                        : e.flags == A2PACK_PACK_ENTRY_LZ4 ? "lz4"
                                                           : "stored";
  if (a.json) {
    nlohmann::json j = run_summary_json(run.get());
    j["packfile"] = a.packfile;
    j["index"] = i;
    j["entry"] = {{"offset", e.offset},         {"length", e.length},
                  {"raw_length", e.raw_length}, {"storage", storage},
                  {"crc32c", e.crc32c ? fmt::format("{:#010x}", e.crc32c) : "none"}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("packfile      {}\n", a.packfile);
  fmt::print("index         {} of {}\n", i, api->len(p.get()));
  fmt::print("entry         offset {}, {} bytes {} ({} bytes of run), crc32c {}\n", e.offset,
             e.length, storage, e.raw_length,
             e.crc32c ? fmt::format("{:#010x}", e.crc32c) : "none");
  print_run(run.get(), false);
}

void run_inspect(const InspectArgs& a) {
  if (!a.packfile.empty()) {
    if (!a.run_path.empty())
      throw UsageError("inspect takes --run FILE or --packfile F --index I, not both");
    inspect_entry(a);
    return;
  }
  if (a.run_path.empty()) throw UsageError("inspect needs --run FILE or --packfile F --index I");
  a2pack_run* run = nullptr;
  check(a2pack_run_load(a.run_path.c_str(), &run));
  RunPtr guard(run, a2pack_run_close);
  check_steps(run, a.run_path, a.strict);
  print_run(run, a.json);
}

Registrar reg("inspect", [](CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  auto* c = app.add_subcommand("inspect", "Print a run's metadata, counts and first/last boards");
  // No CLI::ExistingFile check: the open below names a missing file with
  // exit status 3, as every command does.
  c->add_option("--run", a->run_path, "A .a2run2 file (v1 or v2)");
  c->add_option("--packfile", a->packfile, "A packfile (with --index)");
  c->add_option("--index", a->index, "Entry of the packfile")->check(CLI::NonNegativeNumber);
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->add_flag("--strict", a->strict,
              "Fail on a run whose meta.steps disagrees with its steps instead of warning");
  c->callback([a] { run_inspect(*a); });
});

}  // namespace
}  // namespace a2cli
