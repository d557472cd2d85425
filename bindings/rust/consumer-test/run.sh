#!/bin/sh
# Builds this consumer crate and runs its binary with no LD_LIBRARY_PATH:
# a program that depends on `a2pack` must start on its own, whichever way
# a2pack-sys found the library (the caller's environment picks the mode:
# A2PACK_SYS_LIB_DIR, PKG_CONFIG_PATH + A2PACK_SYS_USE_PKG_CONFIG, or
# neither for `bundled`). CARGO_TARGET_DIR defaults to the bindings'
# workspace target folder, so the crates built for the tests are reused.
# Also checks that an error returned from main prints one line.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CARGO=${CARGO:-cargo}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/../target}"
"$CARGO" build --quiet --manifest-path "$here/Cargo.toml"
bin="$CARGO_TARGET_DIR/debug/a2pack-consumer-test"
env -u LD_LIBRARY_PATH "$bin"
if env -u LD_LIBRARY_PATH "$bin" fail 2>"$CARGO_TARGET_DIR/consumer-fail.txt"; then
  echo "consumer-test: 'fail' exited 0" >&2; exit 1
fi
err=$(cat "$CARGO_TARGET_DIR/consumer-fail.txt")
case "$err" in
  "Error: A2PACK_E_NOT_FOUND: "*no-such-dataset*) ;;
  *) echo "consumer-test: unexpected error output: $err" >&2; exit 1 ;;
esac
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || { echo "consumer-test: error is not one line: $err" >&2; exit 1; }
echo "consumer-test: ok (error from main: $err)"
