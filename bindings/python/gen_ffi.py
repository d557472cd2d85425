"""Generate a2pack/_ffi.py (cffi, out-of-line ABI mode) from include/a2pack.h.

The declarations come from the one public header, preprocessed with
A2PACK_CDEF defined (no system includes, no attributes), so the binding never
repeats a declaration by hand and cannot drift from the C API.

Usage: python gen_ffi.py [--header PATH] [--out PATH]
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def cdef_text(header: pathlib.Path) -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        sys.exit("gen_ffi: no C compiler found to preprocess a2pack.h (set CC)")
    proc = subprocess.run(
        [cc, "-E", "-P", "-DA2PACK_CDEF", "-nostdinc", "-x", "c", str(header)],
        check=True, capture_output=True, text=True)
    return proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--header", default=str(HERE.parent.parent / "include" / "a2pack.h"))
    ap.add_argument("--out", default=str(HERE / "a2pack" / "_ffi.py"))
    args = ap.parse_args()
    import cffi

    ffibuilder = cffi.FFI()
    ffibuilder.cdef(cdef_text(pathlib.Path(args.header)))
    ffibuilder.set_source("a2pack._ffi", None)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target and rename, so a concurrent import never sees
    # half a file.
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
    os.close(fd)
    ffibuilder.emit_python_code(tmp)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
