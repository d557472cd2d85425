// Commands whose work is done by the Python package (Parquet through pyarrow,
// plots through matplotlib - libraries this C++ tool does not link): they
// replace this process with `PYTHON -c "<module>.main(argv)"`, the way
// `a2pack log to-parquet` does.
#pragma once

#include <string>
#include <vector>

namespace a2cli {

// A local input that does not exist is a system error (exit status 3), as in
// every command; said here, before Python runs, whose errors are status 1.
// Objects in storage (s3://...) are left to Python.
void require_input_exists(const std::string& path);

// The interpreter to run: --python when given, else $A2PACK_PYTHON, else
// "python3" (looked up on PATH).
std::string python_interpreter(const std::string& given);

// exec() `python -c "...; sys.exit(<module>.main(args))" args...` with
// A2PACK_LIBRARY set to the library this process loaded (unless already set),
// so both sides use the same liba2pack. Returns only by throwing CliError.
[[noreturn]] void exec_python_main(const std::string& python, const std::string& module,
                                   const std::vector<std::string>& args, const char* needs);

}  // namespace a2cli
