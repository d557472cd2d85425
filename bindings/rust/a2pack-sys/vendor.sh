#!/bin/sh
# Copies the C++ sources the `bundled` feature builds (CMakeLists.txt,
# cmake/, include/, src/, pkgconfig/, LICENSE) from the checkout into
# vendor/, so that `cargo package` puts them in the crate: a packaged
# a2pack-sys builds the library without a checkout around it. Run before
# `cargo package` / `cargo publish` (`make rust-package` does). vendor/ is
# not committed.
set -eu
crate=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$crate/../../.." && pwd)
rm -rf "$crate/vendor"
mkdir -p "$crate/vendor"
cp -R "$root/CMakeLists.txt" "$root/LICENSE" "$root/cmake" "$root/include" "$root/src" "$root/pkgconfig" \
  "$crate/vendor/"
echo "a2pack-sys: vendored $(du -sh "$crate/vendor" | cut -f1) of sources from $root"
