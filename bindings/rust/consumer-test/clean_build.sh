#!/bin/sh
# A user's first build: this consumer crate (which depends on `a2pack` by
# path, default features) built in an empty CARGO_TARGET_DIR on a machine
# without libclang, against an installed liba2pack. Checks that
#   - the default features pull in neither bindgen nor clang-sys (so no
#     libclang is ever looked for), and LIBCLANG_PATH names an empty folder;
#   - a2pack-sys prefers the installed library (pkg-config) over building its
#     bundled copy, and says so, and the program runs with no
#     LD_LIBRARY_PATH, reporting the same;
#   - a second build compiles nothing;
#   - an installed a2pack.h that differs from the bindings' only in comments
#     is accepted, and one whose declarations differ is refused, naming it.
# Prints the first and second build times (not checked: the machine's load
# decides them).
#
# Usage: clean_build.sh BUILD_DIR   (a CMake build of the library: `make
# build`'s build/; its `a2pack_static` target is built first, no compile).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: clean_build.sh BUILD_DIR}" && pwd)
CARGO=${CARGO:-cargo}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/a2pack-rust-clean.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail() { echo "clean_build: $*" >&2; exit 1; }
now() { date +%s.%N; }
seconds() { awk "BEGIN { printf \"%.1f\", $2 - $1 }"; }

# Nothing of the caller's choice of library leaks in.
unset A2PACK_SYS_LIB_DIR A2PACK_SYS_INCLUDE_DIR A2PACK_SYS_BUNDLED A2PACK_SYS_USE_PKG_CONFIG A2PACK_SOURCE_DIR \
  A2PACK_SYS_LINK LD_LIBRARY_PATH 2>/dev/null || true
mkdir -p "$tmp/no-libclang"
export LIBCLANG_PATH="$tmp/no-libclang"
export CARGO_TARGET_DIR="$tmp/target"

tree=$("$CARGO" tree --quiet --manifest-path "$here/Cargo.toml" -e features,normal,build)
if printf '%s\n' "$tree" | grep -E 'bindgen|clang-sys' >/dev/null; then
  printf '%s\n' "$tree" | grep -E 'bindgen|clang-sys' >&2
  fail "the default features depend on bindgen or clang-sys"
fi

cmake --build "$build" --target a2pack_static >/dev/null
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(dirname "$(find "$tmp/prefix" -name a2pack.pc | head -n 1)")
libdir=$(dirname "$libdir")
export PKG_CONFIG_PATH="$libdir/pkgconfig"

build_consumer() { # log file; cargo's status is returned
  "$CARGO" build --manifest-path "$here/Cargo.toml" >"$1" 2>&1
}

t0=$(now)
build_consumer "$tmp/first.log" || { cat "$tmp/first.log" >&2; fail "the first build failed"; }
t1=$(now)
grep -F "using the installed liba2pack" "$tmp/first.log" | grep -F "$libdir (pkg-config)" >/dev/null \
  || { cat "$tmp/first.log" >&2; fail "a2pack-sys did not say it used the installed library in $libdir"; }
out=$(env -u LD_LIBRARY_PATH "$CARGO_TARGET_DIR/debug/a2pack-consumer-test")
printf '%s\n' "$out" | grep -F "library: the installed liba2pack" | grep -F "$libdir (pkg-config), linked statically" \
  >/dev/null || fail "the program reports another library: $out"
printf '%s\n' "$out" | grep -F "consumer ok" >/dev/null || fail "the program did not finish: $out"

t2=$(now)
build_consumer "$tmp/second.log" || { cat "$tmp/second.log" >&2; fail "the second build failed"; }
t3=$(now)
if grep -E '^ *Compiling ' "$tmp/second.log" >/dev/null; then
  cat "$tmp/second.log" >&2
  fail "the second build compiled again"
fi

# A header whose comments alone differ declares the same API.
header="$tmp/prefix/include/a2pack.h"
cp "$header" "$tmp/a2pack.h.orig"
printf '/* a comment the bindings never saw */\n' >>"$header"
build_consumer "$tmp/comment.log" || { cat "$tmp/comment.log" >&2; fail "a comment in the installed header was refused"; }
grep -F "using the installed liba2pack" "$tmp/comment.log" >/dev/null \
  || { cat "$tmp/comment.log" >&2; fail "with a comment added to its header the installed library was not used"; }

# One whose declarations differ is refused (insisting on it: otherwise the
# bundled copy would be built instead).
cp "$tmp/a2pack.h.orig" "$header"
printf 'int a2pack_not_in_the_bindings(void);\n' >>"$header"
t4=$(now)
if A2PACK_SYS_USE_PKG_CONFIG=1 build_consumer "$tmp/differs.log"; then
  fail "an installed a2pack.h with other declarations was accepted"
fi
t5=$(now)
grep -F "does not match these bindings" "$tmp/differs.log" | grep -F "$header" >/dev/null \
  || { cat "$tmp/differs.log" >&2; fail "the refusal does not name the installed header"; }

echo "clean_build: ok: first build $(seconds "$t0" "$t1") s (empty target folder, no libclang, installed" \
  "library), second build $(seconds "$t2" "$t3") s (nothing compiled), a header with other declarations" \
  "refused in $(seconds "$t4" "$t5") s"
