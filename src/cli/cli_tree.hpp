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

// A completion script for `shell` ("bash" or "zsh") covering every command,
// subcommand and visible option of `root`. Throws CliError for other shells.
std::string completion_script(CLI::App& root, const std::string& shell);

}  // namespace a2cli
