// a2pack extract: write selected entries back as their original run files.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_write.hpp"
#include "command.hpp"
#include "pack_util.hpp"

namespace a2cli {
namespace {

struct ExtractArgs {
  std::string packfile, indices, output;
  bool json = false;
};

void run_extract(const ExtractArgs& a) {
  std::vector<uint64_t> idx = parse_indices(a.indices);
  PackPtr p = open_pack(a.packfile);
  if (::mkdir(a.output.c_str(), 0755) != 0 && errno != EEXIST)
    throw CliError(fmt::format("{}: cannot create folder: {}", a.output, std::strerror(errno)),
                   kExitSystem);
  nlohmann::json files = nlohmann::json::array();
  for (uint64_t i : idx) {
    uint8_t* data = nullptr;
    size_t len = 0;
    check(a2pack_pack_read(p.get(), i, 0, &data, &len));
    std::unique_ptr<uint8_t, decltype(&a2pack_free)> own(data, a2pack_free);
    // Upstream's name for extracted runs.
    std::string path = fmt::format("{}/run-{:06}.a2run2", a.output, i);
    // Whole or not at all under its name; the folder is synced once below.
    write_file_atomic(path, data, len, /*durable=*/false);
    if (a.json)
      files.push_back({{"index", i}, {"path", path}, {"bytes", len}});
    else
      status("{} ({} bytes)\n", path, len);
  }
  sync_folder(a.output);
  if (a.json) {
    nlohmann::json j = {{"packfile", a.packfile},
                        {"output", a.output},
                        {"count", files.size()},
                        {"files", files}};
    fmt::print("{}\n", j.dump(2));
  }
}

Registrar reg("extract", [](CLI::App& app) {
  auto a = std::make_shared<ExtractArgs>();
  auto* c = app.add_subcommand("extract", "Write entries back as their original .a2run2 files");
  add_input(c, a->packfile, "packfile", "packfile", "Packfile", "--packfile");
  c->add_option("--indices", a->indices, "Entries, e.g. 0,5,42 or 10-19")->required();
  c->add_option("--output,-o", a->output, "Folder for run-NNNNNN.a2run2 files")->required();
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->callback([a] { run_extract(*a); });
});

}  // namespace
}  // namespace a2cli
