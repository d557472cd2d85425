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
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sized, Tuple, Union, cast

import numpy as np
import numpy.typing as npt

from .dataset import Dataset, EpochSampler, _indices
from .run import RunV2

if TYPE_CHECKING:
    import torch
    import torch.utils.data

_TORCH_MISSING = (
    "a2pack.torch_data needs PyTorch, which is not installed: `pip install torch` "
    "(the rest of a2pack.dataset works without it)")


def _require_torch() -> None:
    """Raise the ImportError that says what to install when PyTorch is
    missing; the callers then import it themselves (a typed import)."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise ImportError(_TORCH_MISSING) from e


class StepBatches:
    """Map-style dataset: ``ds[indices]`` → dict of tensors for those steps.

    ``dataset`` is a :class:`~a2pack.dataset.Dataset` or a folder path.
    ``worker_mmap``: how a copy opened in a DataLoader worker loads the rows
    (True: map steps.npy, shared through the page cache). ``moves_dtype``:
    the tensor dtype of the moves (int64 by default, what cross-entropy
    losses take).
    """

    _ds: Optional[Dataset]

    def __init__(self, dataset: Union[Dataset, str, os.PathLike[str]], *, worker_mmap: bool = True,
                 moves_dtype: str = "int64", gather_workers: int = 1) -> None:
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

    def __getitem__(self, indices: npt.ArrayLike) -> Dict[str, torch.Tensor]:
        _require_torch()
        import torch
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
    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_ds"] = None
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)


class MixedStepBatches:
    """Map-style dataset over several datasets for a tagged
    :class:`~a2pack.mix.MixSampler` (``tagged=True``): the key is a
    ``(2, n)`` array of source numbers and step indices, the value the dict
    of :class:`StepBatches`, rows in the key's order (one gather per source
    in the batch). Pickles by path, like StepBatches."""

    def __init__(self, datasets: List[Union[Dataset, str, os.PathLike[str]]], **kw: Any) -> None:
        self.parts = [StepBatches(d, **kw) for d in datasets]

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def __getitem__(self, key: npt.ArrayLike) -> Dict[str, torch.Tensor]:
        _require_torch()
        import torch
        k = np.asarray(key)
        src, idx = k[0], k[1]
        got = {i: self.parts[i][idx[src == i]] for i in np.unique(src).tolist()}
        first = next(iter(got.values()))
        out = {name: torch.empty((k.shape[1],) + tuple(t.shape[1:]), dtype=t.dtype)
               for name, t in first.items()}
        for i, d in got.items():
            where = torch.from_numpy(np.flatnonzero(src == i))
            for name, t in d.items():
                out[name][where] = t
        return out


class EpochBatchSampler:
    """Yields int64 index arrays, the batches of a seeded permutation
    (:class:`~a2pack.dataset.EpochSampler`): the same seed gives the same
    batches. ``source`` is a number of rows (sample all of them) or an array
    of step indices (e.g. from ``Dataset.filter_sql`` or ``Dataset.split``).
    Call :meth:`set_epoch` before each epoch.

    ``rank``/``num_replicas`` (default 0 of 1): elastic ranks - the
    ``batch_size`` is then the global batch and each yielded array is this
    rank's contiguous slice of it. :meth:`state_dict` /
    :meth:`load_state_dict` (and the same on its iterators, the protocol of
    ``torchdata``'s ``StatefulDataLoader``) save and restore seed, epoch and
    position in O(1) bytes, on any number of ranks."""

    def __init__(self, source: Union[int, np.integer[Any], npt.ArrayLike], *,
                 batch_size: int = 4096, seed: int = 0, drop_last: bool = False,
                 rank: int = 0, num_replicas: int = 1) -> None:
        kw: Dict[str, Any] = dict(batch_size=batch_size, seed=seed, drop_last=drop_last,
                                  rank=rank, world=num_replicas)
        if isinstance(source, (int, np.integer)):
            self._s = EpochSampler(n=int(source), **kw)
        else:
            self._s = EpochSampler(source, **kw)

    def set_epoch(self, epoch: int) -> None:
        self._s.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        return self._s.epoch

    def __len__(self) -> int:
        return len(self._s)

    def __iter__(self) -> Iterator[npt.NDArray[np.int64]]:
        return iter(self._s)

    def state_dict(self) -> Dict[str, Any]:
        return self._s.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self._s.load_state_dict(state)


def make_loader(dataset: Union[Dataset, str, os.PathLike[str]], *,
                indices: Optional[npt.ArrayLike] = None,
                batch_size: int = 4096, seed: int = 0, drop_last: bool = False,
                num_workers: int = 0, **loader_kwargs: Any
                ) -> Tuple[torch.utils.data.DataLoader[Dict[str, torch.Tensor]], EpochBatchSampler]:
    """A ``torch.utils.data.DataLoader`` over ``dataset`` (all rows, or
    ``indices``) yielding dicts of tensors, one gather per batch. Returns
    ``(loader, sampler)``; call ``sampler.set_epoch(e)`` between epochs."""
    _require_torch()
    import torch.utils.data
    data = StepBatches(dataset)
    sampler = EpochBatchSampler(len(data) if indices is None else indices,
                                batch_size=batch_size, seed=seed, drop_last=drop_last)
    # StepBatches is a map-style dataset by protocol: it does not subclass
    # torch's Dataset, so that importing this module needs no PyTorch.
    loader: torch.utils.data.DataLoader[Dict[str, torch.Tensor]] = torch.utils.data.DataLoader(
        cast("torch.utils.data.Dataset[Dict[str, torch.Tensor]]", data), sampler=sampler,
        batch_size=None, num_workers=num_workers, **loader_kwargs)
    return loader, sampler


# ------------------------------------------------------------------ multi-rank
# DistributedSampler is a real torch.utils.data.Sampler subclass, so it is
# made on first access (module __getattr__): importing this module still
# does not import PyTorch. Pickles refer to it as
# a2pack.torch_data.DistributedSampler, which resolves the same way.
_LAZY_CLASSES: Dict[str, type] = {}


def __getattr__(name: str) -> type:
    if name == "DistributedSampler":
        if name not in _LAZY_CLASSES:
            _LAZY_CLASSES[name] = _make_distributed_sampler()
        return _LAZY_CLASSES[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def rank_and_world(rank: Optional[int] = None, num_replicas: Optional[int] = None) -> Tuple[int, int]:
    """``(rank, num_replicas)``: the arguments when given, else from
    ``torch.distributed`` when it is initialised, else ``(0, 1)``."""
    if rank is None or num_replicas is None:
        _require_torch()
        import torch.distributed as dist
        on = dist.is_available() and dist.is_initialized()
        if num_replicas is None:
            num_replicas = dist.get_world_size() if on else 1
        if rank is None:
            rank = dist.get_rank() if on else 0
    rank, num_replicas = int(rank), int(num_replicas)
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise ValueError(f"invalid rank {rank} for {num_replicas} replicas "
                         f"(need 0 <= rank < num_replicas)")
    return rank, num_replicas


def _make_distributed_sampler() -> type:
    _require_torch()
    import torch
    import torch.utils.data

    class DistributedSampler(torch.utils.data.Sampler[Union[int, npt.NDArray[np.int64]]]):
        """``torch.utils.data.DistributedSampler`` semantics over step
        indices: each of ``num_replicas`` ranks draws a disjoint share of
        one seeded permutation per epoch (the same permutation torch's
        sampler draws for the same seed and epoch); together the ranks cover
        every index. ``drop_last=False`` pads by repeating indices from the
        start so every rank gets the same count; ``True`` drops the tail.

        ``source``: a row count, an index array (``Dataset.split``,
        ``filter_sql``) or anything with ``len()`` (a Dataset, StepBatches,
        PackReader: all its indices). ``rank``/``num_replicas`` default from
        ``torch.distributed`` when initialised. ``batch_size=None`` yields
        ints (for per-item datasets); an int yields int64 arrays of that many
        of this rank's indices (for :class:`StepBatches` with
        ``batch_size=None`` in the DataLoader). Call :meth:`set_epoch` before
        each epoch.

        ``elastic=True``: one global sequence of batches of
        ``global_batch_size`` rows (default ``batch_size * num_replicas``;
        give it explicitly to resume on another number of ranks), independent of the number of
        ranks, each rank taking its contiguous slice of each global batch
        (a2pack's own permutation, not torch's; no padding - with
        ``drop_last=False`` the last global batch is split unevenly). Its
        :meth:`state_dict` restores on any ``num_replicas`` with the same
        global batch size. The default mode keeps torch's permutation and
        restores only on the same ranks.
        """

        _indices: Optional[npt.NDArray[np.int64]]

        def __init__(self, source: Union[int, np.integer[Any], Sized],
                     num_replicas: Optional[int] = None,
                     rank: Optional[int] = None, shuffle: bool = True, seed: int = 0,
                     drop_last: bool = False, batch_size: Optional[int] = None,
                     elastic: bool = False, global_batch_size: Optional[int] = None) -> None:
            if isinstance(source, (int, np.integer)):
                self._indices, self._n = None, int(source)
            elif isinstance(source, (np.ndarray, list, tuple)):
                self._indices = _indices(source)
                self._n = int(self._indices.size)
            else:
                self._indices, self._n = None, len(source)
            self.rank, self.num_replicas = rank_and_world(rank, num_replicas)
            self.shuffle = bool(shuffle)
            self.seed = int(seed)
            self.drop_last = bool(drop_last)
            self.batch_size = None if batch_size is None else int(batch_size)
            if self.batch_size is not None and self.batch_size < 1:
                raise ValueError("batch_size must be at least 1")
            self.epoch = 0
            if self.drop_last and self._n % self.num_replicas:
                self.num_samples = self._n // self.num_replicas
            else:
                self.num_samples = -(-self._n // self.num_replicas)
            self.total_size = self.num_samples * self.num_replicas
            self.elastic = bool(elastic)
            self._yielded = 0          # items (or batches) of the latest iteration
            self._resume: Optional[int] = None
            self._elastic: Optional[EpochSampler] = None
            if self.elastic:
                if global_batch_size is None:
                    if self.batch_size is None:
                        raise ValueError("elastic=True needs global_batch_size (or batch_size per "
                                         "rank: the global batch is then batch_size * num_replicas)")
                    global_batch_size = self.batch_size * self.num_replicas
                if not self.shuffle:
                    raise ValueError("elastic=True always shuffles (shuffle=False is not elastic)")
                kw: Dict[str, Any] = dict(batch_size=int(global_batch_size),
                                          seed=self.seed, drop_last=self.drop_last,
                                          rank=self.rank, world=self.num_replicas)
                self._elastic = (EpochSampler(n=self._n, **kw) if self._indices is None
                                 else EpochSampler(self._indices, **kw))
                self.global_batch_size = int(global_batch_size)

        def set_epoch(self, epoch: int) -> None:
            if self._elastic is not None:
                self._elastic.set_epoch(epoch)
            elif int(epoch) != self.epoch or self._resume is None:
                self._resume = None
            self.epoch = int(epoch)

        def _check(self) -> Dict[str, Any]:
            return {"n": self._n, "num_replicas": self.num_replicas, "rank": self.rank,
                    "shuffle": self.shuffle, "drop_last": self.drop_last,
                    "batch_size": self.batch_size, "indices_crc": self._crc()}

        def _crc(self) -> int:
            if self._indices is None:
                return 0
            if not hasattr(self, "_crc_cache"):
                import zlib
                self._crc_cache = zlib.crc32(self._indices.tobytes())
            return self._crc_cache

        def state_dict(self) -> Dict[str, Any]:
            """O(1) checkpoint. Elastic mode: the library's sampler state
            (restores on any num_replicas). Default mode: seed, epoch and the
            items (or batches) yielded, with the shape it was taken under
            (restores only on the same n, num_replicas, rank, batch_size)."""
            if self._elastic is not None:
                return {"elastic": True, **self._elastic.state_dict()}
            k = self._yielded if self._resume is None else self._resume
            return {"elastic": False, "seed": self.seed, "epoch": self.epoch, "yielded": k,
                    **self._check()}

        def load_state_dict(self, state: Dict[str, Any]) -> None:
            if bool(state.get("elastic")) != self.elastic:
                raise ValueError(f"a DistributedSampler state with elastic={state.get('elastic')} "
                                 f"cannot restore a sampler with elastic={self.elastic}")
            if self._elastic is not None:
                self._elastic.load_state_dict(state)
                self.epoch, self.seed = self._elastic.epoch, self._elastic.seed
                return
            mine = self._check()
            diff = [f"{key} {state.get(key)!r} (this sampler: {mine[key]!r})" for key in mine
                    if state.get(key) != mine[key]]
            if diff:
                raise ValueError("DistributedSampler state taken under another setup: "
                                 + "; ".join(diff) + " - resume on another number of ranks "
                                 "needs elastic=True")
            self.seed, self.epoch = int(state["seed"]), int(state["epoch"])
            self._resume = self._yielded = int(state["yielded"])

        def rank_indices(self) -> npt.NDArray[np.int64]:
            """This rank's indices for the current epoch (int64)."""
            if self.shuffle:
                g = torch.Generator()
                g.manual_seed(self.seed + self.epoch)
                order = torch.randperm(self._n, generator=g).numpy()
            else:
                order = np.arange(self._n, dtype=np.int64)
            if self.total_size > self._n and self._n:
                reps = -(-self.total_size // self._n)
                order = np.tile(order, reps)
            order = order[: self.total_size][self.rank:self.total_size:self.num_replicas]
            order = order.astype(np.int64, copy=False)
            return order if self._indices is None else self._indices[order]

        def __iter__(self) -> Iterator[Union[int, npt.NDArray[np.int64]]]:
            if self._elastic is not None:
                return iter(self._elastic)
            start = 0 if self._resume is None else self._resume
            self._resume = None
            self._yielded = start
            own = self.rank_indices()
            if self.batch_size is None:
                items: List[Any] = own.tolist()
            else:
                items = [own[a:a + self.batch_size] for a in range(0, own.size, self.batch_size)]
            return self._walk(items, start)

        def _walk(self, items: List[Any], start: int) -> Iterator[Any]:
            for k in range(start, len(items)):
                self._yielded = k + 1
                yield items[k]

        def __len__(self) -> int:
            if self._elastic is not None:
                return len(self._elastic)
            if self.batch_size is None:
                return self.num_samples
            return -(-self.num_samples // self.batch_size)

    DistributedSampler.__module__ = __name__
    DistributedSampler.__qualname__ = "DistributedSampler"
    return DistributedSampler


class RankShard:
    """One rank's share of a dataset, opened without loading the others'
    rows: the folder is memory-mapped (only pages this rank touches are ever
    read) and the rank owns the whole runs whose first row falls in its
    contiguous slice of the rows, so shards are disjoint, complete and
    run-aligned.

    ``verify`` (default ``"rows"``): what the rank can check of its own rows
    without reading the others'. The manifest holds one CRC32C over all the
    rows, so a CRC check cannot be confined to one rank; instead each row of
    the shard is checked (numpy, one pass over the rank's rows) against the
    rules every step row obeys, and the first one that breaks a rule is a
    :class:`~a2pack.CorruptError` naming steps.npy, the row and the rule:
    move 0..3, ev_legal within 0..15, ev_values in [0, 1], 0 for illegal
    moves and 1.0 for a legal chosen move, step_index 0 at the shard's first
    row and then 0 (a new run) or one more than the row before, one run_id
    per run, and as many runs starting in the shard as metadata.db records
    there. A board is any 64-bit value to the format, so damage to a board
    is found only by the CRC: ``"crc"`` adds the manifest's CRC over every
    row (the full open's check, streamed over the mapping by the library
    with all cores; it reads the other ranks' rows once, without keeping
    them). ``False``: no check.

    ``indices``: this rank's step indices (a contiguous range); ``counts``:
    every rank's row count; ``sampler(...)``: an :class:`EpochBatchSampler`
    over this rank's rows with as many batches on every rank (``pad=True``
    repeats rows of this rank up to the largest shard; ``False`` truncates
    to the smallest). A dataset with fewer runs than ranks leaves some
    shards empty. Pickles by path.
    """

    def __init__(self, path: Union[str, os.PathLike[str]], rank: Optional[int] = None,
                 num_replicas: Optional[int] = None, *,
                 verify: Union[bool, str] = "rows") -> None:
        if verify not in (True, False, "rows", "crc"):
            raise ValueError(f"verify={verify!r}: expected 'rows', 'crc' or False")
        self.rank, self.num_replicas = rank_and_world(rank, num_replicas)
        self.path = os.fspath(path)
        self._verify = verify
        self.dataset = Dataset(self.path, mmap=True, verify=verify == "crc")
        n, w = len(self.dataset), self.num_replicas
        # Rank r owns the runs that start in [ceil(r*n/w), ceil((r+1)*n/w)),
        # so its rows are [bounds[r], bounds[r+1]). A run starts where
        # step_index is 0; finding the first start at or after a point reads
        # at most one run's step_index column (a few pages of the mapping),
        # so no rank touches the others' rows. Rows are copied out by the
        # library (get_batch), which raises if steps.npy was cut short under
        # the mapping, where a view would end the process.
        ds = self.dataset
        bounds: List[int] = []
        for r in range(w + 1):
            x = -(-r * n // w)
            while x < n:
                block = ds.get_batch(np.arange(x, min(x + 4096, n)))["step_index"]
                hit = np.flatnonzero(block == 0)
                if hit.size:
                    x += int(hit[0])
                    break
                x += 4096
            bounds.append(min(x, n))
        self.bounds = bounds
        self.indices = np.arange(bounds[self.rank], bounds[self.rank + 1], dtype=np.int64)
        self.counts = [bounds[r + 1] - bounds[r] for r in range(w)]
        if verify:
            _check_rows(self.dataset, bounds[self.rank], bounds[self.rank + 1])

    def __len__(self) -> int:
        return int(self.indices.size)

    def sampler(self, *, batch_size: int = 4096, seed: int = 0, pad: bool = True,
                elastic: bool = False, global_batch_size: Optional[int] = None
                ) -> EpochBatchSampler:
        """This rank's batches. ``elastic=True``: instead of this shard's
        rows, this rank's slice of each batch of one global sequence over
        every row (``global_batch_size``, default ``batch_size *
        num_replicas``), which restores on any number of ranks; the rank
        then reads rows from the whole (memory-mapped) dataset."""
        if elastic:
            g = batch_size * self.num_replicas if global_batch_size is None else global_batch_size
            return EpochBatchSampler(len(self.dataset), batch_size=g, seed=seed, rank=self.rank,
                                     num_replicas=self.num_replicas)
        idx = self.indices
        if idx.size:
            target = max(self.counts) if pad else min(self.counts)
            idx = np.resize(idx, target) if target != idx.size else idx
        return EpochBatchSampler(idx, batch_size=batch_size, seed=seed + self.rank)

    def __reduce__(self) -> Tuple[Callable[..., RankShard], Tuple[str, int, int, Union[bool, str]]]:
        return (_reopen_shard, (self.path, self.rank, self.num_replicas, self._verify))


def _reopen_shard(path: str, rank: int, num_replicas: int, verify: Union[bool, str]) -> RankShard:
    return RankShard(path, rank, num_replicas, verify=verify)


def _check_rows(ds: Dataset, a: int, b: int) -> None:
    """Check rows [a, b) of `ds` (whole runs) against the rules of a step row
    (RankShard's docstring); CorruptError naming the first bad row. Works in
    slices of 1 << 20 rows (plus the row before each, for the along-a-run
    rules) so the temporaries stay small."""
    from .errors import CorruptError
    where = f"{ds.path}/steps.npy"
    slice_rows = 1 << 20
    starts = 0  # runs starting in the shard (step_index 0)
    for lo in range(a, b, slice_rows):
        hi = min(lo + slice_rows, b)
        # Copies (get_batch), not views of the mapping: see RankShard.
        r = ds.get_batch(np.arange(lo, hi))
        move = r["move"].astype(np.int64)
        legal = r["ev_legal"].astype(np.int64)
        ev = r["ev_values"]
        si = r["step_index"].astype(np.int64)
        starts += int(np.count_nonzero(si == 0))
        rid = r["run_id"].astype(np.int64)
        bits = ((legal[:, None] >> np.arange(4)) & 1).astype(bool)
        chosen_legal = bits[np.arange(len(r)), np.minimum(move, 3)]
        chosen_value = ev[np.arange(len(r)), np.minimum(move, 3)]
        prev = ds.get_batch(np.arange(lo - 1, lo))[0] if lo > a else None
        p_si = np.concatenate(([-1 if prev is None else int(prev["step_index"])], si[:-1]))
        p_rid = np.concatenate(([-1 if prev is None else int(prev["run_id"])], rid[:-1]))
        cont = si != 0  # the row continues the run of the row before
        rules = (
            (move > 3, lambda i: f"move {move[i]} is not 0..3"),
            (legal > 15, lambda i: f"ev_legal {legal[i]:#x} has bits above the four moves"),
            (~np.isfinite(ev).all(axis=1) | (ev < 0).any(axis=1) | (ev > 1).any(axis=1),
             lambda i: f"ev_values {ev[i].tolist()} are not all in [0, 1]"),
            ((~bits & (ev != 0)).any(axis=1),
             lambda i: f"ev_values {ev[i].tolist()} give a value to a move ev_legal "
                       f"{legal[i]:#x} marks illegal"),
            (chosen_legal & (chosen_value != 1.0),
             lambda i: f"the chosen move {move[i]} is legal but its ev_value is "
                       f"{chosen_value[i]}, not 1.0"),
            (cont & (si != p_si + 1),
             lambda i: f"step_index {si[i]} follows step_index {p_si[i]} (expected "
                       f"{p_si[i] + 1}, or 0 where a run starts)"),
            (cont & (rid != p_rid),
             lambda i: f"run_id {rid[i]} inside a run whose rows carry run_id {p_rid[i]}"),
        )
        if lo == a and len(r) and si[0] != 0:
            raise CorruptError(f"{where}: row {a}: step_index {si[0]} where a run starts "
                               "(the shard's first row)")
        first_bad: Optional[Tuple[int, Callable[[int], str]]] = None
        for bad, say in rules:
            hit = np.flatnonzero(bad)
            if hit.size and (first_bad is None or hit[0] < first_bad[0]):
                first_bad = (int(hit[0]), say)
        if first_bad is not None:
            i, say = first_bad
            raise CorruptError(f"{where}: row {lo + i} (step_index {si[i]}, run_id {rid[i]}; "
                               f"this rank's rows are {a}..{b - 1}): {say(i)}")
    # Runs starting in the shard: as many as metadata.db records there.
    recorded = len(ds.run_ids("first_step_idx >= ? AND first_step_idx < ?", (a, b)))
    if starts != recorded:
        raise CorruptError(f"{where}: rows {a}..{b - 1} start {starts} runs (step_index 0), "
                           f"but metadata.db records {recorded} runs starting there")


class PackRuns:
    """Map-style dataset of the runs of a packfile (``ds[i]`` → RunV2), or of
    one rank's contiguous share of its entries with ``rank`` /
    ``num_replicas`` (``rank_shard=True``). The pack is memory-mapped and
    entries are read only when asked for, so a rank never reads the others'.
    Pickles by path (spawn-started DataLoader workers reopen the pack)."""

    def __init__(self, path: Union[str, os.PathLike[str]], *, rank_shard: bool = False,
                 rank: Optional[int] = None, num_replicas: Optional[int] = None) -> None:
        from .pack import PackReader
        self.path = os.fspath(path)
        self.reader = PackReader(self.path)
        n = len(self.reader)
        if rank_shard:
            # Resolved now: a DataLoader worker has no process group to ask.
            rank, num_replicas = rank_and_world(rank, num_replicas)
            self.start = rank * n // num_replicas
            self.stop = (rank + 1) * n // num_replicas
        else:
            self.start, self.stop = 0, n
        self._args = (rank_shard, rank, num_replicas)

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, i: int) -> RunV2:
        i = int(i)
        if not 0 <= i < len(self):
            raise IndexError(f"run {i} out of range for {len(self)} runs")
        return self.reader.decode(self.start + i)

    def __reduce__(self) -> Tuple[Callable[[str, bool, Optional[int], Optional[int]], PackRuns],
                                  Tuple[str, bool, Optional[int], Optional[int]]]:
        rank_shard, rank, num_replicas = self._args
        return (_reopen_pack_runs, (self.path, rank_shard, rank, num_replicas))


def _reopen_pack_runs(path: str, rank_shard: bool, rank: Optional[int],
                      num_replicas: Optional[int]) -> PackRuns:
    return PackRuns(path, rank_shard=rank_shard, rank=rank, num_replicas=num_replicas)
