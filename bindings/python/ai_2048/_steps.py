"""Upstream's helpers for step arrays in NumPy (its steps.npy + SQLite
dataset; a2pack's step dataset, a2pack.Dataset, has the same 'board',
'move' and 'ev_values' fields)."""

from typing import Any, Tuple

_U64_FORMATS = {"Q", "<Q", "=Q", "@Q", "L", "<L", "=L", "@L"}


def exps_from_boards(boards: Any, parallel: bool = True) -> bytearray:
    """16 tile exponents per packed u64 board (0 empty, 1 for a 2, ...), row-
    major, as one bytearray: np.frombuffer(out, np.uint8).reshape(-1, 16).
    `boards` is a 1-D buffer of uint64 (a NumPy uint64 array, say).
    `parallel` is accepted for upstream's signature; the conversion is one
    vectorised pass either way."""
    try:
        view = memoryview(boards)
    except TypeError:
        raise TypeError(f"'{type(boards).__name__}' object does not support the buffer "
                        f"protocol; boards must be a 1-D buffer of uint64") from None
    if view.ndim != 1:
        raise TypeError("boards must be a 1-D buffer of uint64")
    if view.itemsize != 8 or view.format not in _U64_FORMATS:
        raise BufferError(f"buffer contents are not compatible with u64 (format {view.format!r}, "
                          f"item size {view.itemsize})")
    import numpy as np  # noqa: PLC0415 - lazy: keeps `import ai_2048` cheap
    arr = np.asarray(view).view(np.uint64)
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    out = bytearray(arr.size * 16)
    if arr.size:
        dst = np.frombuffer(out, dtype=np.uint8).reshape(-1, 16)
        np.bitwise_and(arr[:, None] >> shifts, np.uint64(0xF), out=dst, casting="unsafe")
    return out


def batch_from_steps(steps: Any, idxs: Any, parallel: bool = True) -> Tuple[bytearray, Any, Any]:
    """(exponents bytearray of N*16, steps['move'][idxs], steps['ev_values'][idxs])
    for a structured step array and an index array."""
    boards = steps["board"][idxs]
    dirs = steps["move"][idxs]
    evs = steps["ev_values"][idxs]
    return exps_from_boards(boards, parallel), dirs, evs
