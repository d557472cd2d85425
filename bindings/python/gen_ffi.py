"""Generate a2pack/_ffi.py (cffi, out-of-line ABI mode) from include/a2pack.h.

The declarations come from the one public header, preprocessed with
A2PACK_CDEF defined (no system includes, no attributes), so the binding never
repeats a declaration by hand and cannot drift from the C API. The reading of
the header is bindings/header_model.py, shared with the Julia generator.

Usage: python gen_ffi.py [--header PATH] [--out PATH]
"""

import argparse
import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from header_model import preprocess as cdef_text  # noqa: E402  (bindings/header_model.py)


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
