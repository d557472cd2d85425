"""Prioritized experience replay's priorities (docs/replay.md).

``Priorities(n, alpha=0.6, beta=0.4, initial=1.0)`` holds one priority per
row of a dataset; a feed given ``priority=`` draws rows with probability
p^alpha and adds a ``weights`` column (importance weights (N * P)^-beta over
the batch's largest). ``update()`` (or ``Feed.update_priorities``) is
thread-safe while the feed's producers draw. ``save(path)`` writes a ``.npy``
of float32 that numpy reads; ``Priorities.load(path)`` reads one back.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

from ._native import check, ffi, fspath, lib

PathLike = Union[str, "os.PathLike[str]"]


class Priorities:
    """One priority (>= 0) per row; the sampling lives in the library."""

    def __init__(self, n: int, alpha: float = 0.6, beta: float = 0.4, initial: float = 1.0,
                 *, _handle: Any = None) -> None:
        if _handle is None:
            out = ffi.new("a2pack_priorities **")
            check(lib.a2pack_priorities_open(int(n), float(alpha), float(beta), float(initial),
                                             out))
            _handle = out[0]
        self._h = ffi.gc(_handle, lib.a2pack_priorities_close)

    @classmethod
    def load(cls, path: PathLike, alpha: float = 0.6, beta: float = 0.4, *,
             rows: Optional[int] = None) -> "Priorities":
        """Priorities saved by :meth:`save` (or numpy: float32, shape (n,)).
        ``rows`` (e.g. ``len(ds)``) refuses a file of another length."""
        out = ffi.new("a2pack_priorities **")
        check(lib.a2pack_priorities_load(fspath(path), float(alpha), float(beta),
                                         int(rows or 0), out))
        return cls(0, _handle=out[0])

    def save(self, path: PathLike) -> None:
        """Write the priorities as a .npy of float32 (atomically: a temporary
        file beside ``path``, synced and renamed over it)."""
        check(lib.a2pack_priorities_save(self._h, fspath(path)))

    def update(self, indices: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Set rows ``indices`` to ``values`` (checked first: nothing
        changes when an index is outside the rows or a value is negative,
        NaN or infinite)."""
        idx = np.ascontiguousarray(np.asarray(indices).reshape(-1), dtype=np.int64)
        val = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(-1))
        if idx.shape != val.shape:
            raise ValueError(f"{idx.size} indices for {val.size} values")
        check(lib.a2pack_priorities_update(self._h, ffi.from_buffer("int64_t[]", idx),
                                           ffi.from_buffer("float[]", val), idx.size))

    def get(self, indices: npt.ArrayLike) -> npt.NDArray[np.float32]:
        idx = np.ascontiguousarray(np.asarray(indices).reshape(-1), dtype=np.int64)
        out = np.empty(idx.size, np.float32)
        check(lib.a2pack_priorities_get(self._h, ffi.from_buffer("int64_t[]", idx), idx.size,
                                        ffi.from_buffer("float[]", out)))
        return out

    def _info(self) -> Any:
        i = ffi.new("a2pack_priorities_info *")
        i.size = ffi.sizeof("a2pack_priorities_info")
        check(lib.a2pack_priorities_info_get(self._h, i))
        return i

    def __len__(self) -> int:
        return int(self._info().rows)

    @property
    def alpha(self) -> float:
        return float(self._info().alpha)

    @property
    def beta(self) -> float:
        return float(self._info().beta)

    @property
    def total(self) -> float:
        """The sum of p^alpha over the rows."""
        return float(self._info().total)

    @property
    def nbytes(self) -> int:
        """The memory held for the rows: the priorities and the sum tree
        (5.14 bytes a row, up to 6.5 while it grows with a live dataset)."""
        return int(self._info().bytes)

    def __repr__(self) -> str:
        i = self._info()
        return f"Priorities({int(i.rows)}, alpha={i.alpha}, beta={i.beta})"


__all__ = ["Priorities"]
