"""Loading liba2pack and turning C statuses into exceptions.

The library is found, in order: $A2PACK_LIBRARY (a path), then the copy
bundled in this package. It is opened by absolute path, so no LD_PRELOAD or
LD_LIBRARY_PATH is needed.
"""

import os
import pathlib
from typing import Any, Sequence, Union

import numpy as np
import numpy.typing as npt

from . import errors

_HERE = pathlib.Path(__file__).resolve().parent
# Where a clone of the repository keeps the header and `make build`'s library,
# for using the package straight from the checkout (PYTHONPATH=bindings/python).
_CHECKOUT = _HERE.parent.parent.parent
_INSTALL_HINT = ("install the wheel or the sdist (pip install a2pack-*.whl / a2pack-*.tar.gz), "
                 "or `pip install .` from a clone; for development from a clone, `make build` "
                 "and PYTHONPATH=bindings/python (docs: README, Installing)")


def _load_ffi() -> Any:
    """The generated cffi declarations (a2pack/_ffi.py, made from
    include/a2pack.h by gen_ffi.py when the package is built). Used from a
    clone without building the package, they are generated here from the
    clone's header on first import."""
    try:
        from ._ffi import ffi as generated
        return generated
    except ModuleNotFoundError as e:
        if e.name != f"{__package__}._ffi":
            raise
    header = _CHECKOUT / "include" / "a2pack.h"
    gen = _CHECKOUT / "bindings" / "python" / "gen_ffi.py"
    if not (header.is_file() and gen.is_file()):
        raise ImportError(f"a2pack: the generated module a2pack._ffi is missing; {_INSTALL_HINT}")
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(gen), "--header", str(header),
                        "--out", str(_HERE / "_ffi.py")], capture_output=True, text=True)
    if r.returncode:
        raise ImportError(f"a2pack: generating a2pack._ffi from {header} failed: {r.stderr.strip()}")
    from ._ffi import ffi as generated
    return generated


ffi = _load_ffi()  # re-exported: the modules import ffi and lib from here


def _library_path() -> str:
    env = os.environ.get("A2PACK_LIBRARY")
    if env:
        return str(pathlib.Path(env).resolve())
    for name in ("liba2pack.so", "liba2pack.so.0"):
        p = _HERE / name
        if p.exists():
            return str(p)
    built = _CHECKOUT / "build" / "liba2pack.so"
    if built.exists() and (_CHECKOUT / "include" / "a2pack.h").is_file():
        return str(built)
    raise ImportError(
        "a2pack: liba2pack.so is not bundled in this package, A2PACK_LIBRARY is not set and "
        f"no build/liba2pack.so was found in a clone; {_INSTALL_HINT}")


library_path = _library_path()
lib: Any = ffi.dlopen(library_path)  # cffi library object: its attributes are the C API

if lib.a2pack_abi_version() != lib.A2PACK_ABI_VERSION:
    raise ImportError(
        f"a2pack: {library_path} implements ABI {lib.a2pack_abi_version()}, "
        f"this package needs {lib.A2PACK_ABI_VERSION}")

__version__ = ffi.string(lib.a2pack_version()).decode()
abi_version = int(lib.a2pack_abi_version())
zstd_version = ffi.string(lib.a2pack_zstd_version()).decode()
#: The LZ4 release packfile entries are compressed with (a bundled 1.10.0
#: unless the library was built against the system liblz4).
lz4_version = ffi.string(lib.a2pack_lz4_version()).decode()


def last_error() -> str:
    message: str = ffi.string(lib.a2pack_last_error()).decode("utf-8", "replace")
    return message


def check(status: int) -> None:
    """Raise the a2pack exception for a failed status (no-op for A2PACK_OK)."""
    if status != 0:
        raise errors.from_status(int(status), last_error())


def fspath(path: "Union[str, bytes, os.PathLike[str], os.PathLike[bytes]]") -> bytes:
    """A path-like as bytes for the C API."""
    return os.fsencode(os.fspath(path))


class _ArrayView:
    """Exposes library memory to numpy while keeping its owner alive: the
    array's .base is this object, which references the owning handle."""

    __slots__ = ("_owner", "__array_interface__")

    def __init__(self, owner: object, address: int, shape: "tuple[int, ...]", typestr: str,
                 readonly: bool) -> None:
        self._owner = owner
        self.__array_interface__ = {
            "data": (address, readonly),
            "shape": tuple(shape),
            "typestr": typestr,
            "version": 3,
        }


def view_array(owner: object, ptr: Any, shape: "Union[int, Sequence[int]]", dtype: "npt.DTypeLike",
               readonly: bool = True) -> "npt.NDArray[Any]":
    """A numpy array viewing `ptr` (a cffi pointer) without copying.

    `owner` must keep the memory valid (typically the Python object holding the
    library handle); the array keeps `owner` alive for as long as it exists.
    """
    dt = np.dtype(dtype)
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    count = 1
    for s in shape:
        count *= s
    if count == 0 or ptr == ffi.NULL:
        return np.zeros(shape, dtype=dt)
    address = int(ffi.cast("uintptr_t", ptr))
    if dt.fields is not None:
        # Structured dtypes go through a byte view and are re-interpreted.
        raw = np.asarray(_ArrayView(owner, address, (count * dt.itemsize,), "|u1", readonly))
        return raw.view(dt).reshape(shape)
    return np.asarray(_ArrayView(owner, address, shape, dt.str, readonly))
