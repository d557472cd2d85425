"""Print, as CMake -D arguments, the options pyproject.toml gives the wheel's
library build ([tool.scikit-build.cmake.define]), less those that only say
what the wheel installs or leaves out.

The Makefile configures build/ with them, so that build/ and the wheel that
`pip install .` builds compile every file with the same flags: ccache then
serves the wheel's compile from build/'s, and the library the C++ suites
test is the one the Python suites load.
"""
import sys
import tomllib

# What to install and what to build beside the library: build/ keeps its own.
PACKAGING_ONLY = {"A2PACK_PYTHON_WHEEL", "A2PACK_BUILD_TESTS", "A2PACK_BUILD_BENCH",
                  "A2PACK_BUILD_CLI"}

with open(sys.argv[1], "rb") as f:
    defines = tomllib.load(f)["tool"]["scikit-build"]["cmake"]["define"]
print(" ".join(f"-D{k}={v}" for k, v in defines.items() if k not in PACKAGING_ONLY))
