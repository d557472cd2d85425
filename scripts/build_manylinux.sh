#!/usr/bin/env bash
# Builds the Python wheel for an old glibc (manylinux_2_28 by default) for
# x86_64 and aarch64 on any Linux x86_64 build machine, with zig's C/C++
# compiler (`ziglang` from PyPI, as cargo-zigbuild and maturin use it):
# `zig cc -target <arch>-linux-gnu.2.28` compiles and links against glibc
# 2.28's symbol versions whatever the build machine's glibc is, and links
# LLVM's libc++ statically into liba2pack.so and the `a2pack` tool (its
# symbols stay hidden: cmake/a2pack.map exports only a2pack_*).
#
# What goes into the wheel, and what differs from `make wheel`'s:
#   - zstd and SQLite built in, fmt/nlohmann-json/CLI11 headers fetched
#     (A2PACK_HEADER_LIBS=FETCHED: nothing from the build machine's
#     /usr/include reaches the compiler);
#   - libcurl and libcrypto are NOT bundled: they are dlopen()ed on the first
#     s3:// or gs:// path (A2PACK_CURL_DLOPEN=ON), and a machine without them
#     gets an error naming what to install (libcurl.so.4 / libcrypto.so.3).
#     Only their headers are needed to build: Debian's libcurl4-openssl-dev
#     and libssl-dev for the target architecture, fetched with
#     `apt-get download` (arm64 needs `dpkg --add-architecture arm64`,
#     which this script does) and unpacked under the build folder;
#   - debug information stripped at link time (zig's libc++ carries ~70 MB
#     of it);
#   - liba2pack is marked never to be unloaded (-z nodelete): zig's runtime
#     registers the library's static destructors with __cxa_atexit but runs
#     no __cxa_finalize when it is dlclose()d, so a process that unloads it
#     (cffi does at interpreter exit) then called them at exit() in unmapped
#     memory - a segfault after `a2pack report` on a missing file, found by
#     running tests/python against this build;
#   - no io_uring (liburing is not built for the target): batch reads of
#     files kept out of the page cache use threads;
#   - the package's C part (a2pack/_feedcore, the limited API) is compiled
#     against the target's CPython headers, Debian's libpython3.X-dev for
#     that architecture, unpacked like the storage headers.
# Each wheel is built by scikit-build-core (pip wheel) with a CMake
# toolchain file of zig wrappers, then retagged py3-none-manylinux_2_28_<arch>
# (scikit-build-core names the build machine's platform).
#
# Usage: build_manylinux.sh PYTHON OUTDIR [ARCH...]   (ARCH: x86_64, aarch64;
# default both). PYTHON is a venv's python with ziglang and wheel installed.
# Build folders stay in build-manylinux/<arch> (later builds are incremental;
# ccache, when the Makefile set it as launcher, keys on zig's version and the
# target). Logs: build-manylinux/<arch>/wheel.log.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
python=$(realpath -s "$1")
mkdir -p "$2"
out=$(cd "$2" && pwd)
shift 2
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(x86_64 aarch64)
glibc=${A2PACK_MANYLINUX_GLIBC:-2.28}
tag=manylinux_${glibc/./_}
zig=$("$python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
zig_version=$("$zig" version)
work=$src/build-manylinux

deb_arch() { case $1 in x86_64) echo amd64 ;; aarch64) echo arm64 ;; *) echo "unknown arch $1" >&2; exit 2 ;; esac; }

# Debian's packages of another architecture need it in dpkg's list.
ensure_deb_arch() {
  local a=$1
  [ "$(dpkg --print-architecture)" = "$a" ] && return 0
  dpkg --print-foreign-architectures | grep -qx "$a" && return 0
  echo "dpkg --add-architecture $a"
  dpkg --add-architecture "$a"
  apt-get update -qq
}

# Unpacks Debian packages of architecture $2 into $1 (once).
unpack_debs() {
  local root=$1 a=$2; shift 2
  local stamp="$root.$(echo "$*" | md5sum | cut -c1-12).done"
  [ -e "$stamp" ] && return 0
  ensure_deb_arch "$a"
  rm -rf "$root" "$root.debs" && mkdir -p "$root" "$root.debs"
  local p
  (cd "$root.debs" && for p in "$@"; do apt-get download -qq "$p:$a" 2>&1 | grep -v unsandboxed || true; done)
  for p in "$@"; do
    ls "$root.debs/${p}_"*.deb > /dev/null 2>&1 || { echo "apt-get download $p:$a failed" >&2; exit 1; }
  done
  for p in "$root.debs"/*.deb; do dpkg-deb -x "$p" "$root"; done
  touch "$stamp"
}

for arch in "${archs[@]}"; do
  a=$(deb_arch "$arch")
  dir=$work/$arch
  mkdir -p "$dir/tc"
  echo "== $arch: zig $zig_version, -target $arch-linux-gnu.$glibc"
  # The target's libcurl and OpenSSL headers (headers only: the libraries
  # are loaded at run time).
  unpack_debs "$dir/storage-headers" "$a" libcurl4-openssl-dev libssl-dev
  storage_inc="$dir/storage-headers/usr/include;$dir/storage-headers/usr/include/$arch-linux-gnu"
  # The target's CPython headers, for the package's C part (a2pack/_feedcore,
  # built against the limited API: any CPython from 3.9 on runs it). Debian's
  # pyconfig.h picks the architecture's copy under <arch>-linux-gnu/.
  pydev=$(apt-cache depends libpython3-dev 2> /dev/null | awk '/Depends: libpython3\.[0-9]+-dev/ {print $2; exit}')
  [ -n "$pydev" ] || { echo "apt-cache names no libpython3.X-dev behind libpython3-dev" >&2; exit 1; }
  unpack_debs "$dir/python-headers" "$a" "$pydev"
  pyver=${pydev#libpython}
  pyver=${pyver%-dev}
  python_inc="$dir/python-headers/usr/include/python$pyver;$dir/python-headers/usr/include"
  for t in cc c++; do
    printf '#!/bin/sh\nexec "%s" %s -target %s-linux-gnu.%s "$@"\n' "$zig" "$t" "$arch" "$glibc" > "$dir/tc/$t"
  done
  for t in ar ranlib; do
    printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$zig" "$t" > "$dir/tc/$t"
  done
  chmod +x "$dir/tc"/*
  mkdir -p "$dir/empty-root"
  cat > "$dir/tc/toolchain.cmake" <<EOF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR $arch)
set(CMAKE_C_COMPILER "$dir/tc/cc")
set(CMAKE_CXX_COMPILER "$dir/tc/c++")
set(CMAKE_AR "$dir/tc/ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "$dir/tc/ranlib" CACHE FILEPATH "")
# Nothing of the build machine's: no libraries, headers or CMake packages
# (programs - python, pkg-config - are the build machine's).
set(CMAKE_FIND_ROOT_PATH "$dir/empty-root")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
EOF
  rm -rf "$dir/wheel"
  echo "building (log: $dir/wheel.log)"
  start=$SECONDS
  if ! (cd "$src" && CCACHE_BASEDIR=/ CCACHE_COMPILERCHECK="string:zig-$zig_version-$arch-linux-gnu.$glibc" \
      "$python" -m pip wheel --no-deps -v -w "$dir/wheel" . \
      -C build-dir="$dir/build" \
      -C cmake.define.CMAKE_TOOLCHAIN_FILE="$dir/tc/toolchain.cmake" \
      -C cmake.define.A2PACK_HEADER_LIBS=FETCHED \
      -C cmake.define.A2PACK_CURL_DLOPEN=ON \
      -C cmake.define.A2PACK_STORAGE_INCLUDE_DIRS="$storage_inc" \
      -C cmake.define.A2PACK_PYTHON_INCLUDE="$python_inc" \
      -C cmake.define.A2PACK_STATIC_LIBSTDCXX=OFF \
      -C cmake.define.A2PACK_IO_URING=OFF \
      -C cmake.define.CMAKE_SHARED_LINKER_FLAGS="-Wl,--strip-debug -Wl,-z,nodelete" \
      -C cmake.define.CMAKE_EXE_LINKER_FLAGS=-Wl,--strip-debug > "$dir/wheel.log" 2>&1); then
    tail -40 "$dir/wheel.log"
    exit 1
  fi
  echo "built in $((SECONDS - start)) s"
  whl=$(ls "$dir"/wheel/a2pack-*.whl)
  "$python" -m wheel tags --platform-tag "${tag}_$arch" --remove "$whl" > /dev/null
  whl=$(ls "$dir"/wheel/a2pack-*"${tag}_$arch".whl)
  cp "$whl" "$out/"
  echo "wheel: $out/$(basename "$whl")"
done
