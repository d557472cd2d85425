"""Data sources for grain (and so JAX) over a2pack's files.

Each class follows grain's ``RandomAccessDataSource`` protocol (``__len__``,
``__getitem__``) and adds ``__getitems__``, which reads a list of items in
one library call. They pickle by path, so ``grain.DataLoader`` worker
processes reopen the files (memory-mapped) rather than copying them.

* :class:`StepSource` - a step dataset: an item is a row, or with
  ``batch_size`` a whole batch (batch ``i`` of a seeded permutation, one
  gather), the fast path: grain then moves one item per training step.
* :class:`RecordSource` - a Bagz/Säckli record file: an item is a record's
  bytes.
* :class:`PackSource` - a packfile: an item is an entry's payload bytes.

:func:`to_jax` turns a batch dict into ``jax.Array`` s through DLPack
without a copy. grain's own checkpoints (``get_state``/``set_state`` of its
iterators) restore exactly, since an item depends only on its index.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from .dataset import Dataset, EpochSampler, _indices

PathLike = Union[str, os.PathLike[str]]


def _aligned(shape: Any, dtype: Any) -> np.ndarray:
    """An empty array at a 64-byte boundary: XLA takes such CPU memory
    through DLPack as is, and copies anything less aligned."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dt.itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    out: np.ndarray = raw[off:off + nbytes].view(dt).reshape(shape)
    return out


def _columns(ds: Dataset, idx: npt.NDArray[np.int64], workers: int) -> Dict[str, np.ndarray]:
    n = idx.size
    out = (_aligned((n, 16), np.uint8), _aligned((n,), np.uint8), _aligned((n, 4), np.bool_),
           _aligned((n, 4), np.float32))
    exps, moves, legal, ev = ds.get_batch_columns(idx, workers=workers, out=out)
    return {"exponents": exps, "moves": moves, "legal": legal, "ev_values": ev}


class StepSource:
    """Rows of a step dataset for grain.

    ``indices``: the rows to serve (default all; e.g. ``Dataset.filter_sql``).
    ``batch_size``: None - item ``i`` is row ``indices[i]`` as a dict of
    numpy values; an int - item ``i`` is batch ``i`` of the seeded
    permutation of ``indices`` (``seed``; the last batch may be short
    unless ``drop_last``), a dict of ``[B, ...]`` arrays made by one gather.
    Columns: ``exponents`` uint8 [16], ``moves`` uint8, ``legal`` bool [4],
    ``ev_values`` float32 [4].
    """

    def __init__(self, dataset: Union[Dataset, PathLike], *,
                 indices: Optional[npt.ArrayLike] = None, batch_size: Optional[int] = None,
                 seed: int = 0, drop_last: bool = False, gather_workers: int = 1) -> None:
        self._path = dataset.path if isinstance(dataset, Dataset) else os.fspath(dataset)
        self._ds: Optional[Dataset] = dataset if isinstance(dataset, Dataset) else None
        self._idx = None if indices is None else _indices(indices)
        self._n_rows = len(self.dataset) if self._idx is None else int(self._idx.size)
        self.batch_size, self.seed, self.drop_last = batch_size, int(seed), bool(drop_last)
        self._gw = int(gather_workers)
        self._sampler: Optional[EpochSampler] = None
        if batch_size is not None:
            self._sampler = (EpochSampler(n=self._n_rows, batch_size=batch_size, seed=seed,
                                          drop_last=drop_last) if self._idx is None else
                             EpochSampler(self._idx, batch_size=batch_size, seed=seed,
                                          drop_last=drop_last))

    @property
    def dataset(self) -> Dataset:
        if self._ds is None:
            self._ds = Dataset(self._path, mmap=True, verify=False)
        return self._ds

    def __len__(self) -> int:
        return self._n_rows if self._sampler is None else len(self._sampler)

    def _rows(self, items: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return items if self._idx is None else self._idx[items]

    def __getitem__(self, i: int) -> Dict[str, Any]:
        i = int(i)
        if not -len(self) <= i < len(self):
            raise IndexError(f"item {i} out of range: the source has {len(self)}")
        i %= len(self)
        if self._sampler is not None:
            return _columns(self.dataset, self._sampler.batch(i), self._gw)
        cols = _columns(self.dataset, self._rows(np.array([i], dtype=np.int64)), 1)
        return {k: v[0] for k, v in cols.items()}

    def __getitems__(self, items: Sequence[int]) -> List[Dict[str, Any]]:
        if self._sampler is not None:
            return [self[i] for i in items]
        idx = np.asarray(items, dtype=np.int64)
        cols = _columns(self.dataset, self._rows(idx % max(len(self), 1)), self._gw)
        return [{k: v[j] for k, v in cols.items()} for j in range(idx.size)]

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_ds"] = None
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"StepSource({self._path!r}, items={len(self)}, batch_size={self.batch_size})"


class RecordSource:
    """Records of a Bagz/Säckli file (or sharded spec) for grain: item ``i``
    is record ``i``'s bytes; ``__getitems__`` is one batch read."""

    def __init__(self, file_spec: Union[PathLike, Sequence[PathLike]]) -> None:
        from .bag import Reader
        self._reader = Reader(file_spec)

    def __len__(self) -> int:
        return len(self._reader)

    def __getitem__(self, i: int) -> bytes:
        return self._reader[int(i)]

    def __getitems__(self, items: Sequence[int]) -> List[bytes]:
        return self._reader.read_indices(np.asarray(items, dtype=np.int64))

    def __repr__(self) -> str:
        return f"RecordSource({self._reader.file_spec!r}, records={len(self)})"


class PackSource:
    """Entries of a packfile for grain: item ``i`` is entry ``i``'s payload
    bytes (``a2pack.run.RunV2`` decodes it)."""

    def __init__(self, path: PathLike, *, verify: bool = True) -> None:
        from .pack import PackReader
        self._path, self._verify = os.fspath(path), verify
        self._r = PackReader(self._path, mmap=True, verify=verify)

    def __len__(self) -> int:
        return len(self._r)

    def __getitem__(self, i: int) -> bytes:
        return self._r.read(int(i))

    def __getitems__(self, items: Sequence[int]) -> List[bytes]:
        return [self._r.read(int(i)) for i in items]

    def __reduce__(self) -> Any:
        return (_pack_source, (self._path, self._verify))


def _pack_source(path: str, verify: bool) -> PackSource:
    return PackSource(path, verify=verify)


def to_jax(batch: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """The batch's numpy arrays as ``jax.Array`` s on the default (CPU)
    device, through DLPack: no copy when the array is 64-byte aligned, as
    :class:`StepSource` makes them (XLA copies less aligned memory, e.g.
    arrays that came through a worker process's shared memory)."""
    import jax.numpy as jnp

    from . import _jax_exit
    out = {k: jnp.from_dlpack(np.ascontiguousarray(v)) for k, v in batch.items()}
    _jax_exit.track_arrays(out.values())  # let go before the interpreter finalises
    return out
