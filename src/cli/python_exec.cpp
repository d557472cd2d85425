#include "python_exec.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "command.hpp"

namespace a2cli {

void require_input_exists(const std::string& path) {
  if (path.find("://") != std::string::npos) return;  // an object in storage: Python opens it
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
    throw CliError(fmt::format("{}: open: {}", path, std::strerror(errno)), kExitSystem);
}

std::string python_interpreter(const std::string& given) {
  return given.empty() ? default_python() : given;
}

void exec_python_main(const std::string& python, const std::string& module,
                      const std::vector<std::string>& args, const char* needs) {
  if (!std::getenv("A2PACK_LIBRARY")) {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&a2pack_version), &info) && info.dli_fname)
      ::setenv("A2PACK_LIBRARY", info.dli_fname, 1);
  }
  // The Python mains print their status lines unless told to be quiet.
  if (globals().quiet) ::setenv("A2PACK_QUIET", "1", 1);
  // A missing package (a2pack itself, pyarrow, matplotlib) is the system's
  // problem, not the data's: one line naming what to install, exit 3, as for
  // every other missing component - never a traceback.
  const std::string script = fmt::format(
      "import sys\n"
      "def _missing(e):\n"
      "    print(f\"a2pack: error: {{sys.executable}} cannot import {{e.name or e}}: this command "
      "needs Python with the a2pack package and {needs} (pip install 'a2pack[{extra}]', or "
      "choose the interpreter with --python or A2PACK_PYTHON)\", file=sys.stderr)\n"
      "    sys.exit(3)\n"
      "try:\n"
      "    from {module} import main\n"
      "    import {needs}\n"
      "except ImportError as e:\n"
      "    _missing(e)\n"
      "try:\n"
      "    sys.exit(main(sys.argv[1:]))\n"
      "except ImportError as e:\n"
      "    _missing(e)\n",
      fmt::arg("module", module), fmt::arg("needs", needs),
      fmt::arg("extra", std::string(needs) == "matplotlib" ? "report" : "parquet"));
  std::vector<std::string> all = {python, "-c", script};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : all) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execvp(argv[0], argv.data());
  throw CliError(fmt::format("cannot run {}: {} (this command needs Python with the a2pack package "
                             "and {}; --python or A2PACK_PYTHON choose the interpreter)",
                             python, std::strerror(errno), needs),
                 kExitSystem);
}

}  // namespace a2cli
