// Walking the tool's command tree (CLI11's App objects) after every command
// registered itself: old and upstream option spellings mapped to the one
// spelling each idea has, and shell completion generated from the tree.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace a2cli {

// Rewrites, in place, option spellings the chosen command does not define
// into the spelling it does ("--out" -> "--output", "--jobs" -> "--workers",
// "-w" -> "-j", upstream's "--no-progress" -> "--quiet"...). Only tokens
// before a "--" separator that name no option of the command are touched, so
// a command that defines an alias itself keeps it. args excludes argv[0].
void normalize_option_aliases(CLI::App& root, std::vector<std::string>& args);

// Edit distance between two words: the fewest insertions, deletions,
// substitutions and swaps of neighbouring letters that turn one into the
// other (optimal string alignment), ignoring case.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidates a mistyped `word` most likely meant: the one it begins, or
// the nearest within a third of the word's length (ties: all of them); none
// when nothing is near.
std::vector<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates);

// The command the parsed command line chose, as "a2pack dataset stats"
// ("a2pack" when none was).
std::string chosen_command(const CLI::App& root);

// The text after "a2pack: error: " for the failed parse `e` of `args` (in
// order, after normalize_option_aliases): one line naming the command and
// what was wrong, with the nearest valid spelling of a mistyped command or
// option. `*command` receives the command whose --help the hint names.
std::string usage_message(CLI::App& root, const std::vector<std::string>& args,
                          const CLI::ParseError& e, std::string* command);

// A completion script for `shell` ("bash" or "zsh") covering every command,
// subcommand and visible option of `root`, and the values of options that
// take one of a fixed set (completion_values). Throws CliError for other shells.
std::string completion_script(CLI::App& root, const std::string& shell);

}  // namespace a2cli
