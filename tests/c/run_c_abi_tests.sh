#!/usr/bin/env bash
# Installs the build into a fresh prefix and checks the three ways a C host
# consumes it: dlopen by absolute path (clean environment), pkg-config, and
# CMake's find_package. Also checks the exported symbols.
# Usage: run_c_abi_tests.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
fixture=${A2PACK_FIXTURE:-$src/../shared/fixtures/example.a2run2}
work=$(mktemp -d /tmp/a2pack-cabi-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
lib=$(ls -d "$prefix"/lib*/liba2pack.so.0)
cc=${CC:-cc}
pass=0
fail=0
check() {  # name, command...
  local name=$1; shift
  if "$@"; then echo "PASS $name"; pass=$((pass + 1)); else echo "FAIL $name"; fail=$((fail + 1)); fi
}

# Only a2pack_* leaves the library.
exports() {
  local bad
  bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^a2pack_' || true)
  [ -z "$bad" ] || { echo "unexpected exports: $bad"; return 1; }
  [ "$(readelf -d "$lib" | grep -c 'SONAME.*liba2pack.so.0')" = 1 ]
}
check exports_and_soname exports

# dlopen by absolute path, from a clean environment.
$cc -std=c99 -Wall -Werror -I"$prefix/include" "$src/tests/c/dlopen_host.c" -o "$work/dlopen_host" -ldl
check dlopen_host env -i "$work/dlopen_host" "$lib" "$fixture"

# pkg-config only.
flags=$(PKG_CONFIG_PATH=$(dirname "$lib")/pkgconfig pkg-config --cflags --libs a2pack)
$cc -std=c99 -Wall -Werror "$src/tests/c/pkgconfig_client.c" -o "$work/pkgconfig_client" $flags
check pkgconfig_client env -i "$work/pkgconfig_client" "$fixture"

# CMake package config.
cmake -S "$src/tests/c/cmake_consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/consumer.log"
cmake --build "$work/consumer" > "$work/consumer-build.log"
check cmake_find_package env -i LD_LIBRARY_PATH="$(dirname "$lib")" "$work/consumer/consumer" "$fixture"

# The header compiles as C89-compatible C99 and as C++ on its own.
echo '#include "a2pack.h"' > "$work/h.c"
check header_c99 $cc -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$prefix/include" "$work/h.c"
check header_cxx ${CXX:-c++} -x c++ -std=c++11 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" "$work/h.c"

# pkg-config and find_package for other prefixes: /usr (Debian's multiarch
# libdir, lib/x86_64-linux-gnu), /usr/local, and a relative DESTDIR staging.
# A library-only build configured for /usr, installed under DESTDIR so
# nothing touches the machine's own /usr. It takes the tested build's own
# library options, so every file compiles with the flags build/ used and
# ccache serves it (the library is compiled once per configuration).
mapfile -t same_options < <(grep -E '^(A2PACK_[A-Z0-9_]+|CMAKE_BUILD_TYPE):[A-Z]+=' "$build/CMakeCache.txt" |
  grep -vE '^A2PACK_(BUILD_TESTS|BUILD_BENCH|BUILD_CLI|BUILD_FUZZ)[:]' | sed 's/^/-D/')
cmake -S "$src" -B "$work/usr-build" -G Ninja "${same_options[@]}" -DCMAKE_INSTALL_PREFIX=/usr \
  -DA2PACK_BUILD_TESTS=OFF -DA2PACK_BUILD_BENCH=OFF -DA2PACK_BUILD_CLI=OFF > "$work/usr-config.log"
cmake --build "$work/usr-build" --target a2pack > "$work/usr-build.log"
consume_prefix() {  # staged prefix root: pkg-config client and find_package consumer
  local root=$1 pcdir
  pcdir=$(dirname "$(find "$root" -name a2pack.pc | head -n1)")
  local f
  f=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs a2pack) || return 1
  $cc -std=c99 -Wall -Werror "$src/tests/c/pkgconfig_client.c" -o "$root/client" $f || return 1
  env -i "$root/client" "$fixture" > /dev/null || return 1
  cmake -S "$src/tests/c/cmake_consumer" -B "$root/consumer" -DCMAKE_PREFIX_PATH="$(cd "$pcdir/../.." && pwd)" \
    -DCMAKE_FIND_ROOT_PATH="$root" -DCMAKE_BUILD_TYPE=Release > "$root/consumer.log" || return 1
  cmake --build "$root/consumer" > "$root/consumer-build.log" || return 1
  env -i LD_LIBRARY_PATH="$(dirname "$(find "$root" -name 'liba2pack.so.0' | head -n1)")" "$root/consumer/consumer" "$fixture" > /dev/null
}
DESTDIR="$work/stage-usr" cmake --install "$work/usr-build" > /dev/null
check pkgconfig_prefix_usr consume_prefix "$work/stage-usr"
check pkgconfig_usr_multiarch_libdir test -f "$work/stage-usr/usr/lib/$(gcc -print-multiarch)/pkgconfig/a2pack.pc"
DESTDIR="$work/stage-local" cmake --install "$work/usr-build" --prefix /usr/local > /dev/null
check pkgconfig_prefix_usr_local consume_prefix "$work/stage-local"
(cd "$work" && DESTDIR=rel-stage cmake --install "$work/usr-build" > /dev/null)
check pkgconfig_relative_destdir consume_prefix "$work/rel-stage"

echo "c-abi: $pass passed, $fail failed"
[ "$fail" = 0 ]
