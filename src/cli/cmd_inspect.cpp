// a2pack inspect: print one run, from a run file (`inspect RUN`) or a
// packfile entry (`inspect PACK --index I`); --run and --packfile say which
// kind the file is, as older versions required.
//
// The packfile functions are called through the api table, so this shared
// command links and runs in builds without the pack capability (it then says
// so instead of failing to link).
#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "command.hpp"
#include "run_view.hpp"

namespace a2cli {
namespace {

struct InspectArgs {
  std::string path;      // the file, however it was given
  bool as_run = false;   // given as --run
  bool as_pack = false;  // given as --packfile
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

// A packfile by its name or, for a regular file, its first bytes (a FIFO is
// never read: the run loader refuses it by name).
bool looks_like_packfile(const std::string& path) {
  if (path.size() >= 7 && path.compare(path.size() - 7, 7, ".a2pack") == 0) return true;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  return f.read(magic, 8) && std::memcmp(magic, "A2PACK\0\0", 8) == 0;
}

void inspect_entry(const InspectArgs& a) {
  const a2pack_pack_api* api = a2pack_api(A2PACK_ABI_VERSION)->pack;
  if (!api) throw CliError("this a2pack build has no packfile support");
  a2pack_pack* raw_pack = nullptr;
  check(api->open(a.path.c_str(), nullptr, &raw_pack));
  std::unique_ptr<a2pack_pack, void (*)(a2pack_pack*)> p(raw_pack, api->close);
  if (a.index < 0)
    throw UsageError(fmt::format("inspect: {} is a packfile of {} entries: choose one with "
                                 "--index I",
                                 a.path, api->len(p.get())));
  const uint64_t i = static_cast<uint64_t>(a.index);
  a2pack_pack_entry e{};
  e.size = sizeof e;
  check(api->entry_info(p.get(), i, &e));
  a2pack_run* raw = nullptr;
  check(api->decode(p.get(), i, 0, &raw));
  RunPtr run(raw, a2pack_run_close);
  check_steps(run.get(), fmt::format("{}: entry {}", a.path, i), a.strict);
  const char* storage = e.flags == A2PACK_PACK_ENTRY_ZSTD  ? "zstd"
                        : e.flags == A2PACK_PACK_ENTRY_LZ4 ? "lz4"
                                                           : "stored";
  if (a.json) {
    nlohmann::json j = run_summary_json(run.get());
    j["packfile"] = a.path;
    j["index"] = i;
    j["entry"] = {{"offset", e.offset},         {"length", e.length},
                  {"raw_length", e.raw_length}, {"storage", storage},
                  {"crc32c", e.crc32c ? fmt::format("{:#010x}", e.crc32c) : "none"}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("packfile      {}\n", a.path);
  fmt::print("index         {} of {}\n", i, api->len(p.get()));
  fmt::print("entry         offset {}, {} bytes {} ({} bytes of run), crc32c {}\n", e.offset,
             e.length, storage, e.raw_length,
             e.crc32c ? fmt::format("{:#010x}", e.crc32c) : "none");
  print_run(run.get(), false);
}

void run_inspect(const InspectArgs& a) {
  if (a.as_run && a.index >= 0)
    throw UsageError(fmt::format("inspect: --index chooses an entry of a packfile, and {} was "
                                 "given as a run file (--run): give it as the argument or "
                                 "--packfile",
                                 a.path));
  if (a.as_pack || (!a.as_run && (a.index >= 0 || looks_like_packfile(a.path)))) {
    inspect_entry(a);
    return;
  }
  a2pack_run* run = nullptr;
  check(a2pack_run_load(a.path.c_str(), &run));
  RunPtr guard(run, a2pack_run_close);
  check_steps(run, a.path, a.strict);
  print_run(run, a.json);
}

Registrar reg("inspect", [](CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  auto* c = app.add_subcommand("inspect", "Print a run's metadata, counts and first/last boards");
  // No CLI::ExistingFile check: the open below names a missing file with
  // exit status 3, as every command does.
  InputGroup& in = add_input(c, a->path, "file", "run file or packfile",
                             "A .a2run2 file (v1 or v2), or a packfile (with --index)");
  CLI::Option* run = c->add_option("--run", a->path, "The file, instead of the argument: a .a2run2 file");
  CLI::Option* pack = c->add_option("--packfile", a->path, "The file, instead of the argument: a packfile (with --index)");
  in.named.push_back(run);
  in.named.push_back(pack);
  c->add_option("--index", a->index, "Entry of the packfile")->check(CLI::NonNegativeNumber);
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->add_flag("--strict", a->strict,
              "Fail on a run whose meta.steps disagrees with its steps instead of warning");
  c->callback([a, run, pack] {
    a->as_run = run->count() != 0;
    a->as_pack = pack->count() != 0;
    run_inspect(*a);
  });
});

}  // namespace
}  // namespace a2cli
