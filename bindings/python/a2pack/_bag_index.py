"""Indexes over a bag's records: record to position, and position lists
for records that repeat (a2pack.bag).
"""

from __future__ import annotations

from typing import Any, List, Optional, Union

import numpy as np

from ._native import check, ffi, lib
from .bag import Reader, _as_bytes


# ---------------------------------------------------------------- indexes

class _IndexBase:
    def __init__(self, reader: Reader):
        if not isinstance(reader, Reader):
            raise TypeError(f"expected a Reader, not {type(reader).__name__}")
        self._reader = reader
        out = ffi.new("a2pack_bag_index **")
        if reader._start == 0 and reader._step == 1 and reader._len == reader._h.count:
            check(lib.a2pack_bag_index_build(reader._h.ptr, ffi.NULL, 0, reader._workers(), out))
        else:
            idx = reader._global_indices(np.arange(reader._len, dtype=np.int64))
            check(lib.a2pack_bag_index_build(
                reader._h.ptr, ffi.from_buffer("uint64_t[]", idx), len(idx), reader._workers(), out))
        self._ptr = ffi.gc(out[0], lib.a2pack_bag_index_close)
        self._unique = int(lib.a2pack_bag_index_unique(self._ptr))

    def _find(self, record) -> List[int]:
        key = _as_bytes(record)
        pos = ffi.new("const uint64_t **")
        cnt = ffi.new("uint64_t *")
        check(lib.a2pack_bag_index_find(self._ptr, key, len(key), pos, cnt))
        n = cnt[0]
        if n == 0:
            return []
        return np.frombuffer(ffi.buffer(pos[0], 8 * n), dtype=np.uint64).tolist()

    def __contains__(self, record) -> bool:
        return bool(self._find(record))

    def __len__(self) -> int:
        """Number of distinct records (compare with len(reader) for duplicates)."""
        return self._unique


class Index(_IndexBase):
    """Reverse index: record → its first position in the reader."""

    def get(self, record: Union[str, bytes]) -> Optional[int]:
        found = self._find(record)
        return found[0] if found else None

    def __getitem__(self, record: Union[str, bytes]) -> int:
        found = self._find(record)
        if not found:
            raise KeyError(record)
        return found[0]


class MultiIndex(_IndexBase):
    """Reverse index: record → all its positions in the reader, ascending."""

    def get(self, record: Union[str, bytes], default: Any = None):
        found = self._find(record)
        return found if found else default

    def __getitem__(self, record: Union[str, bytes]) -> List[int]:
        found = self._find(record)
        if not found:
            raise KeyError(record)
        return found
