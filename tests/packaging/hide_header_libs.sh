#!/usr/bin/env bash
# Runs a command with the system's fmt, nlohmann-json and CLI11 hidden, as on
# a machine that has only a C++20 compiler, CMake and Python: in a private
# mount namespace (unshare -m; needs root), empty folders are bind-mounted
# over Debian's header folders and CMake package folders of libfmt-dev,
# nlohmann-json3-dev and libcli11-dev, and an empty file over their
# pkg-config files. Nothing changes outside the namespace, and nothing is
# uninstalled. Before the command runs, the compiler is asked to include each
# library's header and must fail, and CMake must find none of the three.
# Prints "hide_header_libs: hidden" when all that held.
# Usage: hide_header_libs.sh COMMAND [ARG...]
set -euo pipefail
if [ -z "${A2PACK_HEADER_LIBS_HIDDEN:-}" ]; then
  exec unshare --mount --propagation private env A2PACK_HEADER_LIBS_HIDDEN=1 bash "$0" "$@"
fi
empty_dir=$(mktemp -d /tmp/a2pack-hidden-XXXXXX)
empty_file=$empty_dir.pc
: > "$empty_file"
shopt -s nullglob
for d in /usr/include/fmt /usr/include/nlohmann /usr/include/CLI \
         /usr/lib/*/cmake/fmt /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 \
         /usr/lib/cmake/fmt /usr/lib/cmake/nlohmann_json /usr/lib/cmake/CLI11; do
  [ -d "$d" ] && mount --bind "$empty_dir" "$d"
done
for f in /usr/lib/*/pkgconfig/fmt.pc /usr/share/pkgconfig/nlohmann_json.pc /usr/share/pkgconfig/CLI11.pc \
         /usr/include/CLI11.hpp; do
  [ -f "$f" ] && mount --bind "$empty_file" "$f"
done
cxx=${CXX:-c++}
for h in fmt/core.h nlohmann/json.hpp CLI/CLI.hpp; do
  if echo "#include <$h>" | "$cxx" -std=c++20 -fsyntax-only -x c++ - 2> /dev/null; then
    echo "hide_header_libs: <$h> is still found by $cxx" >&2
    exit 1
  fi
done
probe=$empty_dir-probe
mkdir -p "$probe"
cat > "$probe/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(probe NONE)
foreach(p fmt nlohmann_json CLI11)
  find_package(${p} CONFIG QUIET)
  if(${p}_FOUND)
    message(FATAL_ERROR "${p} is still found: ${${p}_DIR}")
  endif()
endforeach()
EOF
if ! cmake -S "$probe" -B "$probe/build" > "$probe/log" 2>&1; then
  cat "$probe/log" >&2
  exit 1
fi
rm -rf "$probe"
echo "hide_header_libs: hidden (fmt, nlohmann-json, CLI11 headers and CMake packages)"
rc=0
"$@" || rc=$?
rm -rf "$empty_dir" "$empty_file"
exit $rc
