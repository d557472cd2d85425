#include "python_exec.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "command.hpp"

namespace a2cli {

std::string python_interpreter(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("A2PACK_PYTHON");
  return env && *env ? env : "python3";
}

void exec_python_main(const std::string& python, const std::string& module,
                      const std::vector<std::string>& args, const char* needs) {
  if (!std::getenv("A2PACK_LIBRARY")) {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&a2pack_version), &info) && info.dli_fname)
      ::setenv("A2PACK_LIBRARY", info.dli_fname, 1);
  }
  std::vector<std::string> all = {
      python, "-c", fmt::format("import sys; from {} import main; sys.exit(main(sys.argv[1:]))", module)};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : all) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execvp(argv[0], argv.data());
  throw CliError(fmt::format("cannot run {}: {} (this command needs Python with the a2pack package "
                             "and {}; --python or A2PACK_PYTHON choose the interpreter)",
                             python, std::strerror(errno), needs));
}

}  // namespace a2cli
