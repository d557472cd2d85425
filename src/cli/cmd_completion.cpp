// `a2pack completion bash|zsh`: prints the shell completion script.
#include <fmt/format.h>

#include <memory>

#include "cli_tree.hpp"
#include "command.hpp"

namespace a2cli {
namespace {

Registrar reg("completion", [](CLI::App& app) {
  auto shell = std::make_shared<std::string>();
  auto* c = app.add_subcommand("completion", "Print a shell completion script (bash or zsh)");
  choices(c->add_option("shell", *shell, "Shell")->required(), {"bash", "zsh"});
  CLI::App* root = &app;
  c->callback([root, shell] { fmt::print("{}", completion_script(*root, *shell)); });
});

}  // namespace
}  // namespace a2cli
