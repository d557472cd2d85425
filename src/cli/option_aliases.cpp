// One spelling per idea across commands (--output/-o, --workers/-j,
// --input/-i, --quiet/-q); the spellings older versions and upstream's tools
// used keep working without showing in --help.
//
// Why a rewrite of argv rather than extra CLI11 names: CLI11 lists every
// name of an option in --help and cannot hide one name of several, and a
// second hidden option bound to the same variable breaks ->required().
#include <array>
#include <string_view>
#include <utility>

#include "cli_tree.hpp"

namespace a2cli {
namespace {

// alias -> canonical, tried when the command does not define the alias.
// (A command's input is no alias: add_input gives every command the
// positional argument, -i/--input and its older spelling as one option.)
constexpr std::array<std::pair<std::string_view, std::string_view>, 9> kAliases = {{
    {"--out", "--output"},
    {"--jobs", "--workers"},
    {"--threads", "--workers"},
    {"-w", "-j"},
    {"--in", "--input"},
    {"--no-progress", "--quiet"},
    {"--silent", "--quiet"},
    {"--format-json", "--json"},
    {"--json-output", "--json"},
}};

bool defines(CLI::App* app, const std::string& name) {
  for (CLI::App* a = app; a; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      if (opt->check_name(name)) return true;
    }
    if (!a->get_fallthrough()) break;
  }
  return false;
}

CLI::App* child(CLI::App* app, const std::string& name) {
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(name)) return sub;
  }
  return nullptr;
}

}  // namespace

void normalize_option_aliases(CLI::App& root, std::vector<std::string>& args) {
  CLI::App* cmd = &root;
  for (auto& tok : args) {
    if (tok == "--") break;
    if (tok.size() < 2 || tok[0] != '-') {
      if (CLI::App* sub = child(cmd, tok)) cmd = sub;
      continue;
    }
    auto eq = tok.find('=');
    std::string name = tok.substr(0, eq);
    if (defines(cmd, name)) continue;
    for (const auto& [alias, canonical] : kAliases) {
      if (name == alias && defines(cmd, std::string(canonical))) {
        tok = std::string(canonical) + (eq == std::string::npos ? "" : tok.substr(eq));
        break;
      }
    }
  }
}

}  // namespace a2cli
