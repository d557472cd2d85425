#!/usr/bin/env python3
"""Checks that every ELF file of a wheel runs on the glibc its tag names.

Usage: check_wheel_symbols.py WHEEL [WHEEL...]

For each ELF file in the wheel (found by its magic, whatever its name), the
versions it needs (`readelf -V`: the .gnu.version_r section, which lists
every versioned symbol reference by library and version) are checked:
  - GLIBC_x.y must not be newer than the wheel's manylinux_X_Y tag;
  - GLIBCXX_*, CXXABI_* (libstdc++) and GCC_* (libgcc_s) are refused unless
    the library that defines them travels in the wheel - the manylinux
    wheels link LLVM's libc++ statically, so none should appear;
  - every NEEDED library is glibc's or travels in the wheel.
Prints each file's needs and exits 1 on any violation. readelf reads ELF
files of any architecture, so aarch64 wheels are checked on x86_64 too.
"""

import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

GLIBC_LIBS = re.compile(
    r"^(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|ld-linux-aarch64)\.so(\.\d+)*$")


def tag_glibc(wheel_name):
    m = re.search(r"manylinux_(\d+)_(\d+)_", wheel_name)
    if not m:
        sys.exit(f"{wheel_name}: not a manylinux_X_Y wheel")
    return int(m.group(1)), int(m.group(2))


def version_needs(path):
    """{library: set of version names} from .gnu.version_r, and NEEDED."""
    out = subprocess.run(["readelf", "-V", "-d", "-W", str(path)], capture_output=True,
                         text=True, check=True).stdout
    needs, needed, current = {}, [], None
    for line in out.splitlines():
        m = re.search(r"\(NEEDED\)\s+Shared library: \[(.+)\]", line)
        if m:
            needed.append(m.group(1))
        m = re.search(r"File: (\S+)\s+Cnt:", line)
        if m:
            current = m.group(1)
            needs.setdefault(current, set())
            continue
        m = re.search(r"Name: (\S+)\s+Flags:", line)
        if m and current:
            needs[current].add(m.group(1))
    return needs, needed


def version_key(name):
    m = re.match(r"GLIBC_(\d+)\.(\d+)(?:\.(\d+))?$", name)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def check(wheel):
    limit = tag_glibc(Path(wheel).name)
    problems = []
    with zipfile.ZipFile(wheel) as z, tempfile.TemporaryDirectory() as d:
        names = z.namelist()
        in_wheel = {n.rsplit("/", 1)[-1] for n in names}
        elves = [n for n in names if z.read(n)[:4] == b"\x7fELF"]
        if not elves:
            problems.append("no ELF file in the wheel")
        for n in elves:
            p = z.extract(n, d)
            needs, needed = version_needs(p)
            newest = max((version_key(v) for vs in needs.values() for v in vs if version_key(v)),
                         default=None)
            shown = ".".join(map(str, newest)) if newest else "none"
            print(f"{n}: NEEDED {', '.join(needed) or '-'}; newest GLIBC {shown}")
            for lib, versions in sorted(needs.items()):
                for v in sorted(versions):
                    key = version_key(v)
                    if key is not None and key[:2] > limit:
                        problems.append(f"{n}: {v} from {lib} is newer than the tag's glibc "
                                        f"{limit[0]}.{limit[1]}")
                    elif key is None and v.startswith(("GLIBCXX_", "CXXABI_", "GCC_")) \
                            and lib not in in_wheel:
                        problems.append(f"{n}: {v} from {lib}, which the wheel does not carry")
            for lib in needed:
                if not GLIBC_LIBS.match(lib) and lib not in in_wheel:
                    problems.append(f"{n}: needs {lib}, neither glibc's nor in the wheel")
    return problems


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bad = 0
    for wheel in sys.argv[1:]:
        print(f"== {Path(wheel).name}")
        problems = check(wheel)
        for p in problems:
            print("  PROBLEM", p)
        print(f"  {'FAIL' if problems else 'OK'}: {len(problems)} problems")
        bad += bool(problems)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
