// Entry point of the a2pack command-line tool.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "atomic_write.hpp"
#include "cli_tree.hpp"
#include "command.hpp"

int main(int argc, char** argv) {
  // The commands work in windows and waves whose buffers are freed and
  // allocated again, each of a few hundred KB to tens of MB. glibc's
  // defaults hand such blocks back to the kernel (munmap, heap trimming) and
  // fault them in afresh for the next window: a quarter of `a2pack decode`'s
  // page faults on 3 000 runs. Keep freed memory for reuse in this process.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  CLI::App app{"a2pack: 2048 game-play data (run files, packfiles, datasets, record files, logs)"};
  app.set_version_flag("-V,--version", std::string("a2pack ") + a2pack_version());
  // Usage lines name the whole command ("Usage: a2pack dataset build ..."),
  // not the subcommand alone; subcommands inherit the formatter.
  app.formatter(std::make_shared<a2cli::UsageFormatter>());
  app.add_flag("-q,--quiet", a2cli::globals().quiet,
               "Print only data and errors: no progress bars, status lines or warnings");
  app.require_subcommand(1);
  // --help shows each option's default; options of the top level (-q) are
  // accepted after a subcommand too.
  app.option_defaults()->always_capture_default();
  app.fallthrough();
  // Building every command's parser takes longer than many a command's
  // work: when the first word names a command, only that one is built.
  // Otherwise (help, a typo, completion, which walks the whole tree) all are,
  // so that help and errors list every command.
  const char* first_word = nullptr;  // top-level flags take no values
  for (int i = 1; i < argc && !first_word; ++i)
    if (argv[i][0] != '-') first_word = argv[i];
  const a2cli::Registered* chosen = nullptr;
  if (first_word && std::strcmp(first_word, "completion") != 0)
    for (auto& reg : a2cli::registry())
      if (std::strcmp(reg.name, first_word) == 0) chosen = &reg;
  if (chosen)
    chosen->setup(app);
  else
    for (auto& reg : a2cli::registry()) reg.setup(app);
  app.footer(
      "Exit status: 0 success; 1 a data problem (damaged input, or a check found problems);\n"
      "2 usage error (unknown command or option, missing or invalid value);\n"
      "3 system error (a named file that does not exist, I/O, out of memory, network,\n"
      "  a missing component such as the Python package or pyarrow);\n"
      "4 internal error (a bug in a2pack, please report it).");
  // After the whole command line parsed, before any command runs: each
  // command's input given once (positionally or by an option).
  app.parse_complete_callback([&app] { a2cli::check_inputs(app); });
  // A usage error is one line, then where to read more.
  auto hint = [](const std::string& command) {
    fmt::print(stderr, "Try '{} --help' for more information.\n", command);
  };
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    a2cli::normalize_option_aliases(app, args);
    a2cli::prepare_inputs(app, args);
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes it reversed
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with status 0 in CLI11; every other
    // parse error is a usage error, whatever CLI11's own number for it.
    if (e.get_exit_code() == 0) {
      app.exit(e);
      return a2cli::finish_stdout();
    }
    std::string command;
    fmt::print(stderr, "a2pack: error: {}\n", a2cli::usage_message(app, args, e, &command));
    hint(command);
    return a2cli::kExitUsage;
  } catch (const a2cli::CliError& e) {
    fmt::print(stderr, "a2pack: error: {}\n", e.what());
    if (e.exit_code == a2cli::kExitUsage) hint(a2cli::chosen_command(app));
    return e.exit_code;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "a2pack: error: out of memory\n");
    return a2cli::kExitSystem;
  } catch (const std::system_error& e) {
    // fmt::print's failed write to stdout (a full disk, a closed pipe).
    if (std::ferror(stdout))
      fmt::print(stderr, "a2pack: error: stdout: cannot write: {}\n", e.code().message());
    else
      fmt::print(stderr, "a2pack: error: {}\n", e.what());
    return a2cli::kExitSystem;
  } catch (const std::exception& e) {
    fmt::print(stderr, "a2pack: error: {}\n", e.what());
    return a2cli::kExitDataProblem;
  }
  // What a command printed may still sit in stdout's buffer: a command
  // whose output never reached its file has failed.
  return a2cli::finish_stdout();
}
