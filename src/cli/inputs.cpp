// The input of a command, accepted the same way by every command (the
// positional argument, -i/--input, or the command's older spelling), and
// options with a fixed set of values, which completion offers.
#include <algorithm>
#include <cctype>
#include <list>
#include <map>

#include <fmt/format.h>

#include "command.hpp"

namespace a2cli {
namespace {

std::list<InputGroup>& groups() {
  static std::list<InputGroup> g;  // a list: add_input hands out references
  return g;
}

std::map<const CLI::Option*, std::vector<std::string>>& values_of() {
  static std::map<const CLI::Option*, std::vector<std::string>> v;
  return v;
}

std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// "-i/--input/--packfile": every spelling of an option.
std::string spellings(const CLI::Option* opt) {
  std::string s;
  for (const auto& n : opt->get_snames()) s += (s.empty() ? "-" : "/-") + n;
  for (const auto& n : opt->get_lnames()) s += (s.empty() ? "--" : "/--") + n;
  return s;
}

std::string command_of(const CLI::App* app) {
  std::string path;
  for (const CLI::App* a = app; a && a->get_parent(); a = a->get_parent())
    path = path.empty() ? a->get_name() : a->get_name() + " " + path;
  return path;
}

// Whether the parse of `root` chose `app` (and every command above it).
bool chosen(const CLI::App& root, const CLI::App* app) {
  const CLI::App* a = app;
  for (; a->get_parent(); a = a->get_parent())
    if (a->count() == 0) return false;
  return a == &root;
}

std::string missing_message(const InputGroup& g) {
  const std::string cmd = command_of(g.app);
  std::string names;
  for (const CLI::Option* o : g.named) names += (names.empty() ? "" : " or ") + spellings(o);
  return fmt::format("no {} given: name it as the argument (a2pack {} {}) or with {}", g.what,
                     cmd, upper(g.positional->get_name()), names);
}

}  // namespace

InputGroup& add_input(CLI::App* c, std::string& value, const std::string& name,
                      const std::string& what, const std::string& help, const std::string& older,
                      bool short_i, bool required) {
  InputGroup& g = groups().emplace_back();
  g.app = c;
  g.value = &value;
  g.what = what;
  g.required = required;
  g.positional = c->add_option(name, value, help);
  std::string names = short_i ? "-i,--input" : "--input";
  if (!older.empty()) names += "," + older;
  g.named.push_back(c->add_option(names, value, help + ", instead of the argument"));
  return g;
}

void prepare_inputs(CLI::App& root, const std::vector<std::string>& args) {
  // The chosen command, as normalize_option_aliases finds it.
  CLI::App* cmd = &root;
  size_t end = args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      end = i;
      break;
    }
    // --help shows the argument as optional, which it is.
    if (args[i] == "-h" || args[i] == "--help") return;
    if (args[i].size() > 1 && args[i][0] == '-') continue;
    for (CLI::App* sub : cmd->get_subcommands([](CLI::App*) { return true; }))
      if (sub->check_name(args[i])) {
        cmd = sub;
        break;
      }
  }
  for (InputGroup& g : groups()) {
    if (g.app != cmd || !g.required) continue;
    bool named = false;
    for (size_t i = 0; i < end && !named; ++i) {
      const std::string& tok = args[i];
      if (tok.size() < 2 || tok[0] != '-') continue;
      const std::string name = tok.substr(0, tok.find('='));
      for (const CLI::Option* o : g.named) named |= o->check_name(name);
    }
    g.positional->required(!named);
  }
}

std::string input_missing(const CLI::Option* positional) {
  for (const InputGroup& g : groups())
    if (g.positional == positional) return missing_message(g);
  return {};
}

void check_inputs(const CLI::App& root) {
  for (InputGroup& g : groups()) {
    if (!chosen(root, g.app)) continue;
    const std::string cmd = command_of(g.app);
    std::vector<const CLI::Option*> given;
    for (const CLI::Option* o : g.named)
      if (o->count()) given.push_back(o);
    const bool positional = g.positional->count() != 0;
    if (positional && given.size() == 1 && g.output) {
      // `bag convert -i IN OUT`: OUT filled the first free positional, the
      // input's; it is the output, unless one was given already.
      bool output_given = false;
      for (const CLI::Option* o : g.output_options) output_given |= o->count() != 0;
      if (!output_given) {
        *g.output = g.positional->results().front();
        *g.value = given.front()->results().front();
        continue;
      }
    }
    if (given.size() + (positional ? 1 : 0) > 1) {
      std::vector<std::string> parts;
      if (positional) parts.push_back(fmt::format("'{}' (the argument)", g.positional->results().front()));
      for (const CLI::Option* o : given)
        parts.push_back(fmt::format("'{}' ({})", o->results().front(), spellings(o)));
      std::string list;
      for (size_t i = 0; i < parts.size(); ++i)
        list += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
      throw UsageError(fmt::format("{}: {} given twice, as {}: give it once", cmd, g.what, list));
    }
    if (!positional && given.empty() && g.required)
      throw UsageError(cmd + ": " + missing_message(g));
  }
}

CLI::Option* choices(CLI::Option* opt, std::vector<std::string> values,
                     std::vector<std::string> refused) {
  std::vector<std::string> all = values;
  all.insert(all.end(), refused.begin(), refused.end());
  opt->check(CLI::IsMember(all));
  values_of()[opt] = std::move(values);
  return opt;
}

CLI::Option* complete_values(CLI::Option* opt, std::vector<std::string> values) {
  values_of()[opt] = std::move(values);
  return opt;
}

const std::vector<std::string>& completion_values(const CLI::Option* opt) {
  static const std::vector<std::string> none;
  auto it = values_of().find(opt);
  return it == values_of().end() ? none : it->second;
}

}  // namespace a2cli
