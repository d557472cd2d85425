// Entry point of the a2pack command-line tool.
#include <cstdio>

#include <fmt/format.h>

#include "command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"a2pack: 2048 game-play data (run files, packfiles, datasets, record files, logs)"};
  app.set_version_flag("--version", std::string("a2pack ") + a2pack_version());
  app.add_flag("-q,--quiet", a2cli::globals().quiet, "Print no progress bars");
  app.require_subcommand(1);
  for (auto& reg : a2cli::registry()) reg.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "a2pack: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
