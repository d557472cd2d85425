"""PyTorch integration for step datasets.

``StepBatches`` is a map-style dataset whose items are whole batches: its
key is an array of step indices and its value a dict of ready tensors, made
by one column gather in the library (no per-row Python). ``EpochBatchSampler``
yields those index arrays. Together::

    from torch.utils.data import DataLoader
    ds = StepBatches("data/ds")
    sampler = EpochBatchSampler(len(ds), batch_size=4096, seed=0)
    loader = DataLoader(ds, sampler=sampler, batch_size=None, num_workers=2)
    for epoch in range(10):
        sampler.set_epoch(epoch)
        for batch in loader:
            batch["exponents"]  # uint8 [B, 16]; "moves" int64 [B];
                                # "legal" bool [B, 4]; "ev_values" float32 [B, 4]

PyTorch is imported only when a batch is made; without it, a clear
ImportError says what to install. With ``num_workers > 0`` the dataset is
pickled by path and each worker opens the folder again (memory-mapped by
default, so the workers share the page cache instead of each holding a copy).
"""

from __future__ import annotations

import os
from typing import Iterator, Optional, Union

import numpy as np

from .dataset import Dataset, EpochSampler, _indices

_TORCH_MISSING = (
    "a2pack.torch_data needs PyTorch, which is not installed: `pip install torch` "
    "(the rest of a2pack.dataset works without it)")


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError(_TORCH_MISSING) from e
    return torch


class StepBatches:
    """Map-style dataset: ``ds[indices]`` → dict of tensors for those steps.

    ``dataset`` is a :class:`~a2pack.dataset.Dataset` or a folder path.
    ``worker_mmap``: how a copy opened in a DataLoader worker loads the rows
    (True: map steps.npy, shared through the page cache). ``moves_dtype``:
    the tensor dtype of the moves (int64 by default, what cross-entropy
    losses take).
    """

    def __init__(self, dataset: Union[Dataset, str, os.PathLike], *, worker_mmap: bool = True,
                 moves_dtype: str = "int64", gather_workers: int = 1):
        self._ds = dataset if isinstance(dataset, Dataset) else Dataset(dataset)
        self._path = self._ds.path
        self._worker_mmap = worker_mmap
        self._moves_dtype = moves_dtype
        self._gather_workers = gather_workers
        self._len = len(self._ds)

    @property
    def dataset(self) -> Dataset:
        if self._ds is None:
            self._ds = Dataset(self._path, mmap=self._worker_mmap, verify=False)
        return self._ds

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, indices) -> dict:
        torch = _torch()
        exps, moves, legal, ev = self.dataset.get_batch_columns(
            _indices(indices), workers=self._gather_workers)
        return {
            "exponents": torch.from_numpy(exps),
            "moves": torch.from_numpy(moves.astype(self._moves_dtype, copy=False)),
            "legal": torch.from_numpy(legal),
            "ev_values": torch.from_numpy(ev),
        }

    # A copy sent to a worker carries the path, not the rows; the rows were
    # checked against the manifest's CRC when the original was opened.
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_ds"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)


class EpochBatchSampler:
    """Yields int64 index arrays, the batches of a seeded permutation
    (:class:`~a2pack.dataset.EpochSampler`): the same seed gives the same
    batches. ``source`` is a number of rows (sample all of them) or an array
    of step indices (e.g. from ``Dataset.filter_sql`` or ``Dataset.split``).
    Call :meth:`set_epoch` before each epoch."""

    def __init__(self, source, *, batch_size: int = 4096, seed: int = 0,
                 drop_last: bool = False):
        if isinstance(source, (int, np.integer)):
            self._s = EpochSampler(n=int(source), batch_size=batch_size, seed=seed,
                                   drop_last=drop_last)
        else:
            self._s = EpochSampler(source, batch_size=batch_size, seed=seed, drop_last=drop_last)

    def set_epoch(self, epoch: int) -> None:
        self._s.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        return self._s.epoch

    def __len__(self) -> int:
        return len(self._s)

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self._s)


def make_loader(dataset: Union[Dataset, str, os.PathLike], *, indices=None,
                batch_size: int = 4096, seed: int = 0, drop_last: bool = False,
                num_workers: int = 0, **loader_kwargs):
    """A ``torch.utils.data.DataLoader`` over ``dataset`` (all rows, or
    ``indices``) yielding dicts of tensors, one gather per batch. Returns
    ``(loader, sampler)``; call ``sampler.set_epoch(e)`` between epochs."""
    torch = _torch()
    data = StepBatches(dataset)
    sampler = EpochBatchSampler(len(data) if indices is None else indices,
                                batch_size=batch_size, seed=seed, drop_last=drop_last)
    loader = torch.utils.data.DataLoader(data, sampler=sampler, batch_size=None,
                                         num_workers=num_workers, **loader_kwargs)
    return loader, sampler
