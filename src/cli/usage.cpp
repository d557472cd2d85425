// Usage errors that teach: one line naming the command and what was wrong
// ("stats: unknown option '--packfle'; did you mean '--packfile'?"), in place
// of CLI11's own two lines, which name neither the command nor a near
// spelling, and which report a missing required subcommand when the word
// given for it was a typo.
#include <algorithm>
#include <cctype>
#include <regex>

#include <fmt/format.h>

#include "cli_tree.hpp"
#include "command.hpp"

namespace a2cli {

// Written here, not taken from a library: CLI11 suggests nothing, the
// project's other dependencies have no string distance, and this is a dozen
// lines over words of a few letters. Damerau's swap of neighbours counts as
// one edit because "inpsect" for "inspect" is the commonest typo of all.
size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<size_t> d((n + 1) * (m + 1));
  auto at = [&](size_t i, size_t j) -> size_t& { return d[i * (m + 1) + j]; };
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  for (size_t i = 0; i <= n; ++i) at(i, 0) = i;
  for (size_t j = 0; j <= m; ++j) at(0, j) = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      size_t v = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1,
                           at(i - 1, j - 1) + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]))
        v = std::min(v, at(i - 2, j - 2) + 1);
      at(i, j) = v;
    }
  return at(n, m);
}

std::vector<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::vector<std::string> begun;
  if (word.size() >= 2)
    for (const auto& c : candidates)
      if (c.size() > word.size() && edit_distance(c.substr(0, word.size()), word) == 0)
        begun.push_back(c);
  if (begun.size() == 1) return begun;
  // A third of the word: one edit in "inf", two in "to-parket", three at most.
  const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  size_t best = limit + 1;
  std::vector<std::string> out;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best) {
      best = d;
      out.clear();
    }
    if (d == best) out.push_back(c);
  }
  return out;
}

namespace {

std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// "'a'", "'a' or 'b'", "'a', 'b' or 'c'".
std::string quoted_or(const std::vector<std::string>& words) {
  std::string s;
  for (size_t i = 0; i < words.size(); ++i)
    s += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + fmt::format("'{}'", words[i]);
  return s;
}

std::string comma_list(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : ", ") + w;
  return s;
}

// "dataset stats" for that command, "" for the tool itself.
std::string path_of(const CLI::App* app) {
  std::string path;
  for (const CLI::App* a = app; a && a->get_parent(); a = a->get_parent())
    path = path.empty() ? a->get_name() : a->get_name() + " " + path;
  return path;
}

std::vector<CLI::App*> children(const CLI::App* app) {
  std::vector<CLI::App*> out;
  for (CLI::App* sub : const_cast<CLI::App*>(app)->get_subcommands([](CLI::App*) { return true; }))
    if (!sub->get_group().empty()) out.push_back(sub);
  return out;
}

// Sorted, for a listing a reader scans.
std::vector<std::string> names_of(const std::vector<CLI::App*>& apps) {
  std::vector<std::string> out;
  for (const CLI::App* a : apps) out.push_back(a->get_name());
  std::sort(out.begin(), out.end());
  return out;
}

// A command that only groups others (the tool, `bag`, `dataset`, `log`).
bool is_group(const CLI::App* app) { return !children(app).empty(); }

// The option `name` ("--packfile", "-i", a positional's name) of `app` or of
// the parents it falls through to; nullptr when none.
const CLI::Option* find_option(const CLI::App* app, const std::string& name) {
  for (const CLI::App* a = app; a; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options())
      if (opt->check_name(name)) return opt;
    if (!a->get_fallthrough()) break;
  }
  return nullptr;
}

// Every visible long spelling of an option of `app` (and of the parents it
// falls through to), with its dashes.
std::vector<std::string> long_options(const CLI::App* app) {
  std::vector<std::string> out;
  for (const CLI::App* a = app; a; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options())
      if (!opt->get_group().empty())
        for (const auto& l : opt->get_lnames()) out.push_back("--" + l);
    if (!a->get_fallthrough()) break;
  }
  return out;
}

// "-o/--output", or "OUT" for a positional argument.
std::string display(const CLI::Option* opt) {
  if (opt->get_lnames().empty() && opt->get_snames().empty()) return upper(opt->get_name());
  std::string s;
  for (const auto& n : opt->get_snames()) s += (s.empty() ? "-" : "/-") + n;
  for (const auto& n : opt->get_lnames()) s += (s.empty() ? "--" : "/--") + n;
  return s;
}

std::string display_name(const CLI::App* app, const std::string& name) {
  const CLI::Option* opt = find_option(app, name);
  return opt ? display(opt) : name;
}

// The command the words choose, walking group commands only: the tool,
// `bag`, `dataset` and `log` take no arguments and no options with values,
// so every word there that is not an option names a command. `*unknown`
// receives the first word that names none.
CLI::App* walk(CLI::App& root, const std::vector<std::string>& args, std::string* unknown) {
  CLI::App* app = &root;
  for (size_t i = 0; i < args.size() && is_group(app); ++i) {
    const std::string& tok = args[i];
    if (tok == "--") break;
    if (tok.size() > 1 && tok[0] == '-') {
      const CLI::Option* opt = find_option(app, tok.substr(0, tok.find('=')));
      if (opt && opt->get_items_expected_min() > 0 && tok.find('=') == std::string::npos) ++i;
      continue;
    }
    CLI::App* next = nullptr;
    for (CLI::App* sub : children(app))
      if (sub->check_name(tok)) next = sub;
    if (!next) {
      *unknown = tok;
      return app;
    }
    app = next;
  }
  return app;
}

// The command the parse reached: the deepest one chosen.
const CLI::App* deepest(const CLI::App& root) {
  const CLI::App* app = &root;
  for (;;) {
    auto subs = app->get_subcommands();
    if (subs.empty()) return app;
    app = subs.back();
  }
}

std::string with_command(const std::string& cmd, const std::string& msg) {
  return cmd.empty() ? msg : cmd + ": " + msg;
}

// Words nothing took: unknown options and arguments the command has no
// place for.
std::string leftovers_message(const CLI::App* app, const std::vector<std::string>& left) {
  std::vector<std::string> parts;
  // `pack runs/ out.a2pack`: the stray word is likely the output of a
  // command that names it only with -o.
  const CLI::Option* output = find_option(app, "--output");
  bool output_hint = output && output->count() == 0 && output->get_excludes().empty();
  for (const auto& tok : left) {
    if (tok.size() > 1 && tok[0] == '-' && !std::isdigit(static_cast<unsigned char>(tok[1]))) {
      std::string name = tok.substr(0, tok.find('='));
      std::string part = fmt::format("unknown option '{}'", name);
      if (name.rfind("--", 0) == 0) {
        std::vector<std::string> near = nearest(name, long_options(app));
        if (!near.empty()) part += fmt::format("; did you mean {}?", quoted_or(near));
      }
      parts.push_back(part);
    } else if (output_hint) {
      parts.push_back(fmt::format("unexpected argument '{}' (an output is named with -o/--output)",
                                  tok));
      output_hint = false;
    } else {
      parts.push_back(fmt::format("unexpected argument '{}'", tok));
    }
  }
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s;
}

const char* kind_of_value(const std::string& type) {
  if (type == "UINT") return "a whole number, 0 or more";
  if (type == "INT") return "a whole number";
  if (type == "FLOAT") return "a number";
  return "a valid value";
}

// CLI11's message for e, reworded to name the option as the user may type
// it and what it expects.
std::string reworded(const CLI::App* app, const CLI::ParseError& e) {
  const std::string what = e.what();
  std::smatch m;
  if (dynamic_cast<const CLI::RequiredError*>(&e) &&
      std::regex_match(what, m, std::regex("(\\S+) is required"))) {
    const CLI::Option* opt = find_option(app, m[1]);
    if (opt && opt->get_lnames().empty() && opt->get_snames().empty()) {
      std::string input = input_missing(opt);  // names the options that may name it too
      return input.empty() ? fmt::format("missing argument {}", display(opt)) : input;
    }
    return fmt::format("{} is required", opt ? display(opt) : std::string(m[1]));
  }
  if (std::regex_match(what, m, std::regex("Could not convert: (\\S+) = (.*)"))) {
    const CLI::Option* opt = find_option(app, m[1]);
    return fmt::format("{}: '{}' is not {}", opt ? display(opt) : std::string(m[1]),
                       std::string(m[2]), kind_of_value(opt ? opt->get_type_name() : ""));
  }
  if (std::regex_match(what, m, std::regex("(\\S+): (.*) not in \\{(.*)\\}"))) {
    std::string values = m[3];
    std::replace(values.begin(), values.end(), ',', ' ');
    std::vector<std::string> list;
    for (size_t p = 0; p < values.size();) {
      size_t q = values.find(' ', p);
      if (q == std::string::npos) q = values.size();
      if (q > p) list.push_back(values.substr(p, q - p));
      p = q + 1;
    }
    return fmt::format("{}: '{}' is not one of {}", display_name(app, m[1]), std::string(m[2]),
                       comma_list(list));
  }
  if (std::regex_match(what, m, std::regex("(\\S+): \\d+ required \\S+ missing")))
    return fmt::format("{} needs a value", display_name(app, m[1]));
  if (std::regex_match(what, m, std::regex("(\\S+): At Most \\d+ required but received \\d+")))
    return fmt::format("{} given more than once: give it once", display_name(app, m[1]));
  if (std::regex_match(what, m, std::regex("(\\S+) excludes (\\S+)")))
    return fmt::format("give {} or {}, not both", display_name(app, m[2]), display_name(app, m[1]));
  if (std::regex_match(what, m, std::regex("(\\S+) requires (\\S+)")))
    return fmt::format("{} needs {}", display_name(app, m[1]), display_name(app, m[2]));
  std::string s = what;
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

}  // namespace

std::string chosen_command(const CLI::App& root) {
  std::string path = path_of(deepest(root));
  return path.empty() ? "a2pack" : "a2pack " + path;
}

std::string usage_message(CLI::App& root, const std::vector<std::string>& args,
                          const CLI::ParseError& e, std::string* command) {
  std::string unknown;
  CLI::App* group = walk(root, args, &unknown);
  const std::string gpath = path_of(group);
  const std::string listing =
      gpath.empty() ? fmt::format("the commands are: {}", comma_list(names_of(children(group))))
                    : fmt::format("the {} commands are: {}", gpath,
                                  comma_list(names_of(children(group))));
  if (!unknown.empty()) {
    *command = gpath.empty() ? "a2pack" : "a2pack " + gpath;
    const std::string full = gpath.empty() ? unknown : gpath + " " + unknown;
    std::vector<std::string> near = nearest(unknown, names_of(children(group)));
    if (near.empty()) return fmt::format("unknown command '{}'; {}", full, listing);
    if (!gpath.empty())
      for (auto& n : near) n = gpath + " " + n;
    return fmt::format("unknown command '{}'; did you mean {}?", full, quoted_or(near));
  }
  const CLI::App* app = is_group(group) ? group : deepest(root);
  const std::string cmd = path_of(app);
  *command = cmd.empty() ? "a2pack" : "a2pack " + cmd;
  // Words nothing took come first: a mistyped option often leaves a
  // required one unset, and the typo is what to fix.
  std::vector<std::string> left = root.remaining(true);
  if (!left.empty()) return with_command(cmd, leftovers_message(app, left));
  if (is_group(app))
    return cmd.empty() ? fmt::format("no command given; {}", listing)
                       : fmt::format("no command given after '{}'; {}", cmd, listing);
  return with_command(cmd, reworded(app, e));
}

}  // namespace a2cli
