"""The training feed: batches gathered ahead of the training step by library
threads into a ring of reusable (and, with CUDA, page-locked) buffers.

``Feed(dataset, ...)`` iterates :class:`FeedBatch` objects in exactly the
epoch sampler's order. Each column of a batch is a numpy array viewing its
ring slot (no copy); ``torch.from_dlpack``, ``jax.numpy.from_dlpack``,
``cupy`` and numpy take it without a copy either. The slot goes back to the
producers only when the batch and every view of it (including tensors made
from it) are gone, so keeping a batch keeps it valid; a consumer that holds
every slot gets an error from ``next()`` rather than a hang.

See docs/training.md for the recipes and the knobs.
"""

from __future__ import annotations

import gc
import importlib.machinery
import importlib.util
import itertools
import operator
import os
import pathlib
import sys
import threading
import time
import warnings
from types import ModuleType
from typing import (TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import numpy as np
import numpy.typing as npt

from ._native import check, ffi, fspath, last_error, lib, library_path, view_array
from . import _jax_exit
from .errors import FullError


def _column_table() -> Tuple[Any, ...]:
    """The library's column table (a2pack_feed_column_info_get), in the
    order of a2pack_feed_column."""
    out = []
    for c in range(int(lib.A2PACK_FEED_COLUMN_COUNT)):
        i = ffi.new("a2pack_feed_column_info *")
        i.size = ffi.sizeof("a2pack_feed_column_info")
        check(lib.a2pack_feed_column_info_get(c, i))
        out.append(i)
    return tuple(out)


_COLUMN_INFO = _column_table()
# Column names, in the order of a2pack_feed_column, and the default selection.
COLUMNS: Tuple[str, ...] = tuple(ffi.string(i.name).decode() for i in _COLUMN_INFO)
DEFAULT_COLUMNS: Tuple[str, ...] = tuple(n for n, i in zip(COLUMNS, _COLUMN_INFO) if i.is_default)

_DTYPES = {
    lib.A2PACK_FEED_DTYPE_U8: np.dtype(np.uint8),
    lib.A2PACK_FEED_DTYPE_BOOL: np.dtype(np.bool_),
    lib.A2PACK_FEED_DTYPE_U16: np.dtype(np.uint16),
    lib.A2PACK_FEED_DTYPE_U32: np.dtype(np.uint32),
    lib.A2PACK_FEED_DTYPE_U64: np.dtype(np.uint64),
    lib.A2PACK_FEED_DTYPE_I32: np.dtype(np.int32),
    lib.A2PACK_FEED_DTYPE_I64: np.dtype(np.int64),
    lib.A2PACK_FEED_DTYPE_F32: np.dtype(np.float32),
}
# The same element types as torch dtypes, by name (torch is imported only when
# a feed asks for tensors).
_TORCH_DTYPES = {np.dtype(np.uint8): "uint8", np.dtype(np.bool_): "bool",
                 np.dtype(np.uint16): "uint16", np.dtype(np.uint32): "uint32",
                 np.dtype(np.uint64): "uint64", np.dtype(np.int32): "int32",
                 np.dtype(np.int64): "int64", np.dtype(np.float32): "float32"}
_MOVES_DTYPES = {np.dtype(np.uint8): lib.A2PACK_FEED_DTYPE_U8,
                 np.dtype(np.int32): lib.A2PACK_FEED_DTYPE_I32,
                 np.dtype(np.int64): lib.A2PACK_FEED_DTYPE_I64}
_PIN = {"auto": lib.A2PACK_FEED_PIN_AUTO, "off": lib.A2PACK_FEED_PIN_OFF,
        "on": lib.A2PACK_FEED_PIN_ON}

# How long one wait inside the library lasts before Python looks at its
# signals again (Ctrl-C), in milliseconds.
_WAIT_SLICE_MS = 100
_E_FULL = lib.A2PACK_E_FULL  # next() when the consumer holds every slot of the ring
_RATE_LIMIT = "feed: rate limit:"  # ... or when a rate limit's wait ran out (its message)


# What feed.py and the C part agree on (_feedcore.c's VERSION): a C part of
# another version is not used.
_CORE_VERSION = 2


def _load_core() -> Optional[ModuleType]:
    """The C part of the feed (_feedcore.c: next() for a batch that is ready,
    without the interpreter's cost after each training step), or None:
    then feed.py does the same in Python. The build beside the library comes
    first (the library A2PACK_LIBRARY names, or a clone's build folder: built
    with it, with its sanitizers), then the package's (an installed wheel).
    It uses the library only through cffi's function pointers, so either
    serves any library. A2PACK_FEEDCORE=0 turns it off."""
    if os.environ.get("A2PACK_FEEDCORE", "1") == "0" or sys.implementation.name != "cpython":
        return None
    name = f"{__package__}._feedcore"
    path = pathlib.Path(library_path).parent / "_feedcore.abi3.so"
    if path.is_file():
        try:
            loader = importlib.machinery.ExtensionFileLoader(name, str(path))
            spec = importlib.util.spec_from_file_location(name, path, loader=loader)
            if spec is not None:
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                if getattr(module, "VERSION", 1) == _CORE_VERSION:
                    return module
                warnings.warn(f"a2pack: {path} is of another version of the package; "
                              f"Feed.__next__ runs in Python", RuntimeWarning, stacklevel=2)
                return None
        except ImportError as e:  # another architecture, a damaged file: said, then Python
            warnings.warn(f"a2pack: {path} does not load ({e}); Feed.__next__ runs in Python",
                          RuntimeWarning, stacklevel=2)
    try:
        from . import _feedcore  # type: ignore[attr-defined]  # the wheel's
    except ImportError:
        return None
    return _feedcore if getattr(_feedcore, "VERSION", 1) == _CORE_VERSION else None


_core = _load_core()


def _address(cdata: Any) -> int:
    return int(ffi.cast("uintptr_t", cdata))


def _release_cell(cell: Any) -> None:
    """Release the batch in a cell (a2pack_feed_batch **), if any, emptying
    it: one library call, so whatever interrupts the caller, the batch is
    released once."""
    lib.a2pack_feed_batch_release_cells(ffi.new("a2pack_feed_batch **[1]", [cell]), 1)


# A batch left in a feed's output cell when the feed goes (see Feed._out).
_release_left_over = _release_cell


class _Slot:
    """Holds the consumer's reference to a ring slot while its batch is out,
    in a cell of its own (`c[0]`, NULL while the batch is not out): it is
    moved in by plain stores and released by one library call that empties
    the cell, so no interrupt can make it released twice or not at all. The
    views of the batch keep this object alive (through their base), so a
    batch the consumer still holds when the feed is gone keeps its slot
    until its last view goes."""

    __slots__ = ("c", "__weakref__")

    def __init__(self) -> None:
        self.c = ffi.new("a2pack_feed_batch **")

    def __del__(self) -> None:
        c = getattr(self, "c", None)  # (none when __init__ was interrupted)
        if c is not None and c[0] != ffi.NULL:
            _release_cell(c)


class _SlotViews:
    """The Python objects of one ring slot (at one row count), made once and
    handed out again each time the slot comes round: a FeedBatch, its column
    arrays (or tensors) and the array over the span they cover. Making them
    is most of the cost of a batch on the Python side, and the same slot
    always has the same layout.

    An entry is either out (its slot's reference held, the objects the
    consumer's) or idle (no reference held, the objects reachable from the
    feed only). It goes back to idle, and the slot to the producers, once
    none of its objects is referenced from outside: every view numpy, torch
    (through DLPack) or a memoryview makes of a column refers to that column
    or to the span's array, and every view torch makes of a tensor shares
    its storage, so reference counts (and torch's storage use counts) say
    whether the consumer still holds anything of the batch."""

    __slots__ = ("slot", "objects", "storages", "storage_ids", "use_count", "baseline", "batch")

    def __init__(self, slot: _Slot, batch: "FeedBatch", owned: Tuple[Any, ...],
                 tensors: Tuple[Any, ...]) -> None:
        self.slot = slot
        self.batch = batch
        # The objects a consumer can hold: the batch, its columns, and what
        # their views refer to (a numpy view's base is the span's array).
        self.objects: Tuple[Any, ...] = (batch, *owned, *batch._arrays.values())
        # Torch tensors: their storages (kept, so the handles stay valid) and
        # torch's count of the tensors and views that share each (one storage
        # when the columns are views of one tensor over the span).
        storages: Dict[int, Any] = {}
        for t in tensors:
            st = t.untyped_storage()
            storages.setdefault(st._cdata, st)
        self.storages = tuple(storages.values())
        self.storage_ids = tuple(storages)
        # untyped_storage() hands out these same objects: the consumer may
        # hold one.
        self.objects += self.storages
        self.use_count: Any = None
        if tensors:
            import torch  # noqa: PLC0415 - only feeds asked for torch tensors get here
            self.use_count = torch._C._storage_Use_Count
        # Set by the feed once no local variable refers to the objects;
        # until then the batch counts as held.
        self.baseline: Optional[List[int]] = None

    def _counts(self) -> Iterator[int]:
        counts: Iterator[int] = map(sys.getrefcount, self.objects)
        if self.use_count is not None:
            counts = itertools.chain(counts, map(self.use_count, self.storage_ids))
        return counts

    def counts(self) -> List[int]:
        return list(self._counts())

    def held(self) -> bool:
        """Whether the consumer refers to any object of the batch."""
        # A count below its baseline cannot happen; one above it is a holder.
        # (One lazy pass, stopping at the first holder: this runs for each
        # batch.)
        if self.baseline is None:
            return True
        return any(map(operator.gt, self._counts(), self.baseline))

    def in_use(self) -> bool:
        """Held, or a copy out of the slot (FeedBatch.hold_until) still runs."""
        return self.held() or (bool(self.batch._pending) and self.batch._copying())


def _is_completion(x: Any) -> bool:
    return hasattr(x, "query") or hasattr(x, "is_ready")


def _completions(done: Any) -> List[Any]:
    """The objects of `done` that say when they are complete: `done` itself,
    or the leaves of a container or JAX pytree that do."""
    if _is_completion(done):
        return [done]
    jax = sys.modules.get("jax")
    if jax is not None:
        leaves = jax.tree_util.tree_leaves(done)
    elif isinstance(done, (list, tuple)):
        leaves = list(done)
    elif isinstance(done, dict):
        leaves = list(done.values())
    else:
        return []
    out: List[Any] = []
    for leaf in leaves:
        out += _completions(leaf) if isinstance(leaf, (list, tuple, dict)) else (
            [leaf] if _is_completion(leaf) else [])
    return out


class FeedBatch(Mapping[str, Any]):
    """One batch: a read-only mapping of column name to numpy array (or,
    with ``tensors="torch"``, torch tensor), views of the ring slot, plus
    where it lies in the order.

    ``epoch``, ``batch`` (index of the global batch in its epoch), ``rows``
    (this rank's rows), ``global_rows`` (all ranks'), ``sequence`` (the
    batch's place in the feed's whole sequence), ``pinned``.

    An asynchronous copy out of the ring (``non_blocking=True`` from pinned
    memory) holds no reference to the batch: use :meth:`to`, or
    :meth:`hold_until` for a copy made otherwise, so the slot is not
    refilled while the copy may still read it.
    """

    __slots__ = ("_arrays", "_pending", "epoch", "batch", "rows", "global_rows", "sequence",
                 "pinned")

    def __init__(self, arrays: Dict[str, Any], info: Any, pinned: bool) -> None:
        self._arrays = arrays
        self._pending: List[Any] = []
        self.pinned = pinned
        self._place(info)

    def to(self, device: Any, non_blocking: bool = True) -> Dict[str, Any]:
        """The columns as torch tensors on `device` (e.g. ``"cuda"``), by
        name. With ``non_blocking`` (the default) and a page-locked ring the
        copies run asynchronously on the current CUDA stream, overlapping the
        step running there; an event recorded after them keeps the slot from
        the producers until they have finished, whether or not the batch is
        still held. (``tensor.to(..., non_blocking=True)`` by hand has no
        such guard: keep the batch until the copy is done, or pass an event
        to :meth:`hold_until`.)"""
        import torch  # noqa: PLC0415 - a method for torch users
        from torch.utils.dlpack import from_dlpack  # noqa: PLC0415

        out = {}
        for name, col in self._arrays.items():
            t = col if isinstance(col, torch.Tensor) else from_dlpack(col)
            out[name] = t.to(device, non_blocking=non_blocking)
        dev = torch.device(device)
        if non_blocking and dev.type == "cuda":
            ev = torch.cuda.Event()  # type: ignore[no-untyped-call]
            ev.record(torch.cuda.current_stream(dev))
            self.hold_until(ev)
        return out

    def hold_until(self, done: Any) -> None:
        """Keep this batch's slot from the producers until `done` has
        completed, even after every reference to the batch is gone: a CUDA
        event (torch or cupy: ``query()``) recorded after an asynchronous
        copy out of the batch, or an array being made from it (jax:
        ``is_ready()``), or a tuple, list or dict of them, or any JAX pytree
        (what a jitted step returns: its arrays are ready once the step has
        run). The feed looks again at its next ``next()``; ``close()`` waits
        for it (``synchronize()`` / ``block_until_ready()``)."""
        leaves = _completions(done)
        if not leaves:
            raise TypeError(f"hold_until needs an object with query() or is_ready() (or a "
                            f"pytree of them), not {type(done).__name__}")
        self._pending.extend(leaves)

    def _copying(self) -> bool:
        """True while a copy hold_until() was told of may still read the slot."""
        pending = self._pending
        while pending:
            d = pending[-1]
            if not (d.query() if hasattr(d, "query") else d.is_ready()):
                return True
            pending.pop()
        return False

    def _wait_copies(self) -> None:
        for d in self._pending:
            (d.synchronize if hasattr(d, "synchronize") else d.block_until_ready)()
        self._pending.clear()

    def _place(self, info: Any) -> None:
        # cffi reads the uint64_t fields as Python ints.
        self.epoch = info.epoch
        self.batch = info.batch
        self.rows = info.rows
        self.global_rows = info.global_rows
        self.sequence = info.sequence

    def __getitem__(self, name: str) -> Any:
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def __getattr__(self, name: str) -> Any:
        # Only for what no slot or method answers: column names, which never
        # begin with "_" (a slot not set yet, as copy and pickle probe for
        # one, would otherwise look itself up here for ever).
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._arrays[name]
        except KeyError:
            raise AttributeError(name) from None

    def copy(self) -> Dict[str, Any]:
        """The columns copied out of the ring slot, by name (numpy arrays or
        torch tensors, as the batch's): they stay valid and unchanged however
        long they are kept, and can be pickled or sent to another process."""
        return {name: col.clone() if hasattr(col, "clone") else np.array(col)
                for name, col in self._arrays.items()}

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a FeedBatch views a ring slot of its feed and cannot be pickled or "
                        "copied: take the columns out with batch.copy() (a dict of copies) or "
                        "np.array(batch[name])")

    def __repr__(self) -> str:
        cols = ", ".join(f"{k}: {a.dtype}{list(a.shape)}" for k, a in self._arrays.items())
        return f"FeedBatch(epoch={self.epoch}, batch={self.batch}, rows={self.rows}, {cols})"


class _PyFeedBase:
    """Iteration in Python, where the C part (_feedcore) is missing."""

    def __iter__(self) -> "_PyFeedBase":
        return self

    def __next__(self) -> "FeedBatch":
        return self._next_python()  # Feed's __next__ is _next_python itself

    def _next_python(self) -> "FeedBatch":
        raise NotImplementedError

    # What the C part keeps: nothing, here.
    def _core_init(self, *args: Any) -> None:
        pass

    def _core_register(self, *args: Any) -> None:
        pass

    def _core_activate(self, entry: "_SlotViews") -> None:
        pass

    def _core_unplace(self, entry: "_SlotViews") -> None:
        pass

    def _core_close(self) -> None:
        pass


if TYPE_CHECKING:
    _FeedBase = _PyFeedBase
else:
    # The C part's __next__ is the type's own slot (a Python __next__ in the
    # class would replace it), so `for b in feed` and `next(feed)` reach it
    # without a Python frame.
    _FeedBase = _PyFeedBase if _core is None else _core.FeedBase


def _column_bits(columns: Sequence[str]) -> int:
    bits = 0
    for c in columns:
        if c not in COLUMNS:
            raise ValueError(f"unknown column {c!r}; the columns are {', '.join(COLUMNS)}")
        bits |= 1 << COLUMNS.index(c)
    return bits


def _shuffle_option(shuffle: Union[bool, str]) -> int:
    if shuffle is True or shuffle == "index":
        return int(lib.A2PACK_FEED_SHUFFLE_INDEX)
    if shuffle is False:
        return int(lib.A2PACK_FEED_SHUFFLE_NONE)
    if shuffle == "stored":
        return int(lib.A2PACK_FEED_SHUFFLE_STORED)
    raise ValueError(f"shuffle must be True, False, 'index' or 'stored', not {shuffle!r}")


class RateLimit:
    """How far a live feed's learner may run ahead of the actors that append
    to its dataset (as Reverb's ``SampleToInsertRatio``): a batch is served
    once the dataset holds ``min_size`` rows and the units (rows, or
    windows) served before it are fewer than ``samples_per_insert * (rows -
    min_size + 1)``; ``next()`` waits for appends meanwhile, and raises
    :class:`~a2pack.errors.FullError` naming the limit after ``timeout``
    seconds (None: waits as long as it takes). The count is the feed's
    position, so a resumed feed keeps it."""

    __slots__ = ("samples_per_insert", "min_size", "timeout")

    def __init__(self, samples_per_insert: float, min_size: int = 0,
                 timeout: Optional[float] = 60.0) -> None:
        spi = float(samples_per_insert)
        if not spi > 0 or spi != spi or spi == float("inf"):
            raise ValueError(f"samples_per_insert must be a positive finite number, not "
                             f"{samples_per_insert!r}")
        if int(min_size) < 0:
            raise ValueError(f"min_size must be at least 0, not {min_size!r}")
        if timeout is not None and not float(timeout) >= 0:
            raise ValueError(f"timeout must be at least 0 seconds (or None), not {timeout!r}")
        self.samples_per_insert = spi
        self.min_size = int(min_size)
        self.timeout = timeout

    def __repr__(self) -> str:
        return (f"RateLimit(samples_per_insert={self.samples_per_insert}, "
                f"min_size={self.min_size}, timeout={self.timeout})")


class Feed(_FeedBase):
    """Batches of a dataset for a training loop, filled ahead by library
    threads, in the epoch sampler's order (see docs/training.md).

    An option not given is not sent: it takes the library's default
    (``a2pack_feed_options_init``: a global batch of 4096 rows, 4 filled
    ahead by one thread, the index shuffle, seed 0, one rank, endless
    epochs, ``pin="auto"``, ``spare_cpu=True``, uint8 moves).

    ``indices`` selects rows (default: all); or pass ``sampler=`` an
    :class:`~a2pack.EpochSampler` to take its indices, batch size, seed,
    drop_last, epoch and order. ``shuffle``: True (the default) walks each
    epoch in the index shuffle's order, a keyed bijection of the positions
    computed batch by batch, which stores nothing and makes nothing before
    the first batch at any row count; ``"stored"`` walks the stored
    permutation of an EpochSampler (4 bytes a row per epoch, made as the
    epoch starts); False keeps the rows in the order given. A loaded
    ``state_dict`` keeps the order it was taken in. ``batch_size`` is the global batch (all ranks);
    with ``world`` > 1 this rank gets its contiguous part of each. The feed
    runs through epochs by itself and stops before epoch ``epochs`` (0:
    never). ``depth`` batches are filled ahead by ``threads`` threads
    (``depth=0``: gathered inside ``next()``); the ring has ``slots``
    buffers (default depth + 2). ``moves_dtype`` is uint8, int32 or int64
    (written in that type directly). ``pin``: "auto" page-locks the ring
    when a CUDA runtime is loaded in the process, "on" insists, "off" never.

    ``spare_cpu`` (default True) keeps the producer threads off the CPU the
    consumer runs on, when the process may use another: their gathers then
    do not evict the training loop's caches between steps (``stats()``'s
    ``spared_cpu`` says which; False lets them run anywhere).

    ``held_timeout`` (seconds, default 60): when the consumer holds every
    slot, ``next()`` waits that long for it to let one go before raising
    :class:`~a2pack.errors.FullError` (0: at once). An asynchronous consumer
    lets go by itself: JAX's dispatch returns before a step has run, and
    XLA keeps the arrays made from a batch (with ``jnp.from_dlpack``) until
    it has, so a loop of jitted steps can have every slot out for a moment.

    ``tensors="torch"`` makes the columns torch tensors (CPU, viewing the
    slot like the numpy arrays; made once per slot, which saves their
    conversion at every batch); the default is numpy arrays.

    Threads: next(), stats(), state_dict(), load_state_dict(),
    set_weights() and close() may be called from several threads; they take
    turns under a lock, so each batch goes to exactly one caller. An
    interrupt (Ctrl-C) or error inside next() loses no batch: one already
    taken from the library goes back, state_dict() counts it as not taken,
    and the next next() returns it. Neither a feed nor its batches pickle
    (use ``state_dict()``, ``batch.copy()``).

    ``mix=`` an :class:`~a2pack.mix.MixSampler` over this dataset's rows
    feeds its weighted global batches instead, from its next batch on and
    without end (its batch size and seed; ``world``/``rank`` take each
    rank's part); :meth:`set_weights` changes the proportions from the next
    batch on, and checkpoints hold the mix's state.

    A sharded dataset larger than RAM is fed by giving its folder instead
    of an open dataset: ``Feed("runs.ds", budget_bytes=8 << 30)`` keeps whole
    shards in memory within the budget (least recently used out), loading
    the next window's shards ahead, and walks the block shuffle: each epoch
    the shards are dealt out to the ranks by the seed, and a rank reads its
    own shards ``window`` at a time (default: as many as half the budget
    holds), each window's rows in a seeded random order. ``batch_size`` is
    the global batch, each rank taking ``batch_size // world`` rows of its
    own shards. Ring, pinning, ``state_dict()`` and ranks work as for any
    feed; ``verify_crc`` (default True) checks each shard as it loads,
    ``shard_window`` sets the shards per window, ``prefetch`` (default True)
    loads the next window's shards on a library thread (False: a producer
    loads them when its batch needs them), and :meth:`shards_info` gives
    the shards and the resident shards' counters.

    Replay orders (docs/replay.md): ``window=T`` makes every unit a window of
    T consecutive steps of one run (never across a run's end); then
    ``batch_size`` counts windows and every column has shape
    ``[batch_size, T, ...]``. ``stride=1`` (default) starts a window at
    every step one fits after, ``stride=T`` tiles each run. Runs shorter
    than T are skipped (``short="skip"``, default) or padded
    (``short="pad"``: the run's last step repeated, and a bool column
    ``valid`` that is False on the padding; ask for it in ``columns``).
    ``replacement=True`` draws every unit of every batch uniformly with
    replacement, without end; otherwise each epoch holds every unit once,
    shuffled as ``shuffle`` says. ``recent=K`` reads only the newest K rows.
    The ``indices`` column gives each row's dataset index.

    ``priority=`` an :class:`~a2pack.Priorities` of ``len(ds)`` draws rows
    with probability p^alpha, endlessly, and adds the ``weights`` column
    (importance weights); :meth:`update_priorities` changes them while the
    feed runs (a batch filled ahead keeps the priorities of when it was
    filled: at most ``depth`` batches old).

    ``live=True`` follows a dataset that another process appends to
    (``a2pack dataset append``, :func:`a2pack.append_runs`, Beam, Ray): an
    append is seen at the next batch after it commits (one ``stat`` of the
    manifest per batch; the folder is opened again on a library thread), its
    rows join the endless orders (``replacement``, ``priority``) at once and
    the epoch orders at the next epoch, and nothing uncommitted is ever
    read. Priorities grow with the rows, each new row at the largest
    priority given so far. For every row of a single-file dataset, opened
    (not a selection or a mix), and for a sharded dataset given by its
    folder, whose appended shards join the block shuffle at the next epoch
    (the shards held stay resident). A ``state_dict()`` taken
    over N rows resumes over N + k: the same batches up to its position,
    the k new rows taken in from there. :meth:`refresh` takes in what was
    committed until now, so that the next batch sees it.

    ``rate_limit=`` a :class:`RateLimit` (live feeds) makes ``next()`` wait
    while the learner is ahead of the actors.
    """

    def __init__(self, dataset: Any, indices: Optional[npt.ArrayLike] = None, *,
                 batch_size: Optional[int] = None, depth: Optional[int] = None,
                 threads: Optional[int] = None, slots: Optional[int] = None,
                 columns: Sequence[str] = DEFAULT_COLUMNS,
                 moves_dtype: "Optional[npt.DTypeLike]" = None, seed: Optional[int] = None,
                 shuffle: Union[None, bool, str] = None,
                 drop_last: Optional[bool] = None, rank: Optional[int] = None,
                 world: Optional[int] = None, epochs: Optional[int] = None,
                 start_epoch: Optional[int] = None, pin: Optional[str] = None,
                 sampler: Any = None, mix: Any = None, tensors: Optional[str] = None,
                 spare_cpu: Optional[bool] = None, held_timeout: float = 60.0,
                 budget_bytes: Optional[int] = None, shard_window: Optional[int] = None,
                 verify_crc: Optional[bool] = None, prefetch: Optional[bool] = None,
                 window: Optional[int] = None,
                 stride: Optional[int] = None, short: Optional[str] = None,
                 replacement: Optional[bool] = None, recent: Optional[int] = None,
                 priority: Any = None, live: bool = False,
                 rate_limit: Optional["RateLimit"] = None) -> None:
        if tensors not in (None, "numpy", "torch"):
            raise ValueError(f"tensors must be 'numpy' or 'torch', not {tensors!r}")
        self._torch = tensors == "torch"
        self._priorities = priority
        if priority is not None and "weights" not in columns:
            columns = tuple(columns) + ("weights",)
        self._held_timeout = float(held_timeout)
        if mix is not None and (sampler is not None or indices is not None):
            raise ValueError("give mix alone: it names the rows (not indices or sampler)")
        if sampler is not None:
            if indices is not None:
                raise ValueError("give indices or sampler, not both")
            sel = getattr(sampler, "_indices", None)
            n = int(sampler.num_indices)
            if sel is None and n != len(dataset):
                sel = np.arange(n, dtype=np.int64)
            indices = sel
            batch_size = int(sampler.batch_size)
            seed = int(sampler.seed)
            drop_last = bool(sampler.drop_last)
            start_epoch = int(sampler.epoch)
            if shuffle is None or shuffle is True:
                shuffle = "stored"  # the sampler's own order
        if moves_dtype is not None and np.dtype(moves_dtype) not in _MOVES_DTYPES:
            raise ValueError(f"moves_dtype must be uint8, int32 or int64, not {np.dtype(moves_dtype)}")
        if pin is not None and pin not in _PIN:
            raise ValueError(f"pin must be 'auto', 'on' or 'off', not {pin!r}")
        self._columns: Tuple[str, ...] = tuple(c for c in COLUMNS if c in set(columns)) + (
            () if "indices" in columns else ("indices",))
        o = ffi.new("a2pack_feed_options *")
        # The library's defaults stand for every option not given: only what
        # the caller chose is sent.
        lib.a2pack_feed_options_init(o)
        given = {"batch_size": batch_size, "depth": depth, "threads": threads, "slots": slots,
                 "seed": seed, "rank": rank, "world": world, "epochs": epochs,
                 "start_epoch": start_epoch}
        for field, value in given.items():
            if value is not None:
                setattr(o, field, int(value))
        o.columns = _column_bits([c for c in columns if c != "indices"])
        if moves_dtype is not None:
            o.moves_dtype = _MOVES_DTYPES[np.dtype(moves_dtype)]
        if shuffle is not None:
            o.shuffle = _shuffle_option(shuffle)
        if drop_last is not None:
            o.drop_last = bool(drop_last)
        if pin is not None:
            o.pin = _PIN[pin]
        if spare_cpu is not None:
            o.spare_consumer_cpu = bool(spare_cpu)
        o.live = bool(live)
        if rate_limit is not None:
            if not isinstance(rate_limit, RateLimit):
                raise TypeError(f"rate_limit must be an a2pack.RateLimit, not {rate_limit!r}")
            o.samples_per_insert = float(rate_limit.samples_per_insert)
            o.min_size = int(rate_limit.min_size)
            o.rate_timeout_ms = (-1 if rate_limit.timeout is None
                                 else int(float(rate_limit.timeout) * 1000))
        out = ffi.new("a2pack_feed **")
        self._mix = mix
        sharded = isinstance(dataset, (str, os.PathLike))
        if not sharded and (budget_bytes, shard_window, verify_crc, prefetch) != (None,) * 4:
            raise ValueError("budget_bytes, shard_window, verify_crc and prefetch are for a "
                             "sharded dataset given by its folder: Feed('path/to/dataset', "
                             "budget_bytes=...)")
        replay = (window, stride, short, replacement, recent, priority) != (None,) * 6
        self._window = int(window) if window is not None else 1
        if replay:
            if sharded or mix is not None or indices is not None or sampler is not None:
                raise ValueError("window, stride, short, replacement and recent take the whole "
                                 "dataset, opened (not a folder, indices, sampler or mix)")
            if window is not None and int(window) < 1:
                raise ValueError(f"window must be at least 1, not {window}")
            if recent is not None and int(recent) <= 0:
                raise ValueError(f"recent must be a positive number of rows, not {recent}")
            if short not in (None, "skip", "pad"):
                raise ValueError(f"short must be 'skip' or 'pad', not {short!r}")
        if sharded:
            if mix is not None or indices is not None or sampler is not None:
                raise ValueError("a sharded dataset is fed in its block shuffle: give no "
                                 "indices, sampler or mix")
            so = ffi.new("a2pack_feed_shards_options *")
            lib.a2pack_feed_shards_options_init(so)
            if budget_bytes is not None:
                so.budget_bytes = int(budget_bytes)
            if shard_window is not None:
                so.window = int(shard_window)
            if verify_crc is not None:
                so.verify_crc = bool(verify_crc)
            if prefetch is not None:
                so.prefetch = bool(prefetch)
            check(lib.a2pack_feed_open_shards(fspath(dataset), so, o, out))
        elif replay:
            ro = ffi.new("a2pack_feed_replay_options *")
            lib.a2pack_feed_replay_options_init(ro)
            if window is not None:
                ro.window = int(window)
            if stride is not None:
                ro.stride = int(stride)
            if short is not None:
                ro.pad_short = short == "pad"
            if replacement is not None:
                ro.replacement = bool(replacement)
            if recent is not None:
                ro.recent = int(recent)
            if priority is not None:
                ro.priorities = priority._h
            check(lib.a2pack_feed_open_replay(dataset._check_open(), ro, o, out))
        elif mix is not None:
            h = dataset._check_open()
            check(lib.a2pack_feed_open_mix(h, mix._h, int(mix.next_batch), o, out))
        else:
            h = dataset._check_open()
            if indices is None:
                ptr, n = ffi.NULL, 0
            else:
                idx = np.ascontiguousarray(np.asarray(indices), dtype=np.int64)
                if idx.ndim != 1:
                    raise ValueError("indices must be one-dimensional")
                n = int(idx.size)
                ptr = ffi.cast("int64_t *", idx.ctypes.data) if n else ffi.new("int64_t[1]")
            check(lib.a2pack_feed_open(h, ptr, n, o, out))
        self._h: Any = ffi.gc(out[0], lib.a2pack_feed_close)
        self._dataset = dataset  # keeps the Python object (and its path) around for repr
        self._info = ffi.new("a2pack_feed_batch_info *")
        self._info.size = ffi.sizeof("a2pack_feed_batch_info")
        self._view = ffi.new("a2pack_feed_column_view *")
        self._view.size = ffi.sizeof("a2pack_feed_column_view")
        # Where the library puts the batch it hands out. It stays there until
        # next() returns it: one left there (an interrupt or an error came
        # first) was never delivered, and goes back to the feed (_settle) at
        # the next call, to be handed out again; close() or collecting the
        # feed releases it.
        self._out = ffi.gc(ffi.new("a2pack_feed_batch **"), _release_left_over)
        self._ended = ffi.new("int32_t *")
        self._ids = [(c, COLUMNS.index(c)) for c in self._columns]
        # Per (slot, rows): the batch objects made for it (see _SlotViews);
        # the entries whose batch the consumer may still hold.
        self._views: Dict[Tuple[int, int], _SlotViews] = {}
        self._handed_out: List[_SlotViews] = []
        # The consumer side (everything above, and the C part's table) is
        # changed under this lock: next(), stats(), state_dict(),
        # load_state_dict(), set_weights() and close() may come from several
        # threads. _gen counts the batches given back (see _next_python).
        # (The C part's lock says, without a call, whether it is held.)
        self._lock = threading.Lock() if _core is None else _core.Lock()
        self._gen = 0
        # Room for every slot of the ring: the batches given back at once
        # (by the C part: their references; here: their cells).
        slots = self._stats_locked()["slots"]
        self._release = ffi.new("a2pack_feed_batch *[]", slots)
        self._cells = ffi.new("a2pack_feed_batch **[]", slots)
        # The handed-out list is shared with the C part: changed in place only.
        # JAX arrays made over the slots are let go at exit (_jax_exit).
        _jax_exit.track_owner(self, Feed._slot_spans)
        self._core_init(_address(self._h), _address(lib.a2pack_feed_advance),
                        _address(lib.a2pack_feed_batch_release), _address(self._release), slots,
                        _address(self._out), _address(self._info), _address(self._ended),
                        self._handed_out, _address(lib.a2pack_feed_put_back), self._lock)

    # -- iteration -----------------------------------------------------------
    if TYPE_CHECKING:
        def __iter__(self) -> "Feed": ...

    def _next_python(self) -> FeedBatch:
        """__next__ in Python: where the C part is missing (then it is
        __next__ itself), and for the cases the C part leaves to it (a copy
        that may still read a dropped batch, more batches out than it looks
        at, a closed feed)."""
        while True:
            with self._lock:
                entry = self._next_locked()
                gen = self._gen
            # The batch is delivered by the stores below, with no call among
            # them or after them up to the return: no interrupt can come in
            # between (Python looks for one on calls, function entries and
            # loops only), nor another thread. An interrupt before them leaves
            # the batch in self._out, undelivered. Another thread that came in
            # as the lock was let go and gave this batch back (_settle: it
            # counts) has made it its own next batch: then take the next one.
            if self._gen == gen:
                out = self._out
                entry.slot.c[0] = out[0]
                handed = self._handed_out
                handed += [entry]
                out[0] = ffi.NULL
                return entry.batch

    if _core is None:
        __next__ = _next_python

    def _settle(self) -> None:
        """(Under the lock.) A batch the library handed out that never
        reached the consumer (an interrupt or an error came first) goes back
        to the feed: the next next() hands it out again, and state_dict()
        counts it as not taken."""
        out = self._out
        if out[0] != ffi.NULL:
            self._gen += 1
            if lib.a2pack_feed_put_back(self._h, out):
                _release_cell(out)  # cannot happen: nothing else hands batches out

    def _next_locked(self) -> _SlotViews:
        """(Under the lock.) The next batch's entry, the batch in self._out
        and its place on it, for the caller to deliver."""
        h = self._h
        if h is None:
            self._check_open()
        if self._out[0] != ffi.NULL:
            self._settle()
        # The slots of the batches the consumer dropped go back (the C part
        # does it in the same library call as the next batch's), then the
        # next batch with its place. The newest batch handed out is not
        # looked at: a `for b in feed` loop still holds it while it asks for
        # the next. (Giving slots back wakes no producer unless none is
        # ready: the producers come round by themselves, so neither costs
        # this call a context switch.)
        self._release_dropped(len(self._handed_out) - 1)
        st = lib.a2pack_feed_advance(h, ffi.NULL, 0, 0, self._out, self._info, self._ended)
        return self._after_advance(st)

    def _after_advance(self, st: int) -> _SlotViews:
        """(Under the lock.) next() after a2pack_feed_advance returned `st`
        (and, when it handed one out, the batch in self._out): waits when
        none was ready, makes the views of a slot seen for the first time,
        puts the batch's place on it. Returns its entry; the batch stays in
        self._out until the caller delivers it."""
        out, ended, info = self._out, self._ended, self._info
        h = self._h
        if st and st != _E_FULL:
            check(st)
        if out[0] == ffi.NULL:
            # None ready (or the consumer holds every slot): every slot the
            # consumer let go of goes back first, the producers may need it.
            if self._handed_out:
                self._return_dropped()
            # The wait happens inside the library with the GIL released (cffi
            # releases it around every call), in slices so Ctrl-C is seen.
            while True:
                if ended[0]:
                    raise StopIteration
                st = lib.a2pack_feed_advance(h, ffi.NULL, 0, _WAIT_SLICE_MS, out, info, ended)
                if st == _E_FULL and last_error().startswith(_RATE_LIMIT):
                    raise FullError(last_error(), int(_E_FULL))  # the actors fell behind
                if st == _E_FULL and (self._finish_a_copy() or self._wait_for_a_release()):
                    continue
                if st == _E_FULL:
                    self._raise_full()
                if st:
                    check(st)
                if out[0] != ffi.NULL:
                    break
        b = out[0]
        addr = _address(b)
        key = (addr, int(info.rows))
        entry = self._views.get(key)
        if entry is None:
            entry = self._make_views(b)
            # Counted here, where only the entry (and then the C part)
            # refers to its objects, as when in_use() looks again; used for
            # the slot's next batches only once counted on both sides.
            self._core_register(entry, addr, key[1], entry.objects, entry.storage_ids,
                                entry.use_count, entry.slot, _address(entry.slot.c))
            entry.baseline = entry.counts()
            self._core_activate(entry)
            self._views[key] = entry
        else:
            self._core_unplace(entry)  # the C part puts every field on next time
        entry.batch._place(info)
        return entry

    def _slot_spans(self) -> List[Tuple[int, int]]:
        """(address, bytes) of every column view made over the ring."""
        spans = []
        for entry in list(self._views.values()):
            for col in entry.batch._arrays.values():
                if isinstance(col, np.ndarray):
                    spans.append((int(col.ctypes.data), int(col.nbytes)))
                else:  # a torch tensor
                    spans.append((int(col.data_ptr()), int(col.numel() * col.element_size())))
        return spans

    def _make_views(self, b: Any) -> _SlotViews:
        """The objects of slot `b` at the current batch's row count."""
        if "jax" in sys.modules:
            _jax_exit.ensure_registered()
        v = self._view
        cols = []
        pinned = False
        for name, cid in self._ids:
            check(lib.a2pack_feed_batch_column(b, cid, v))
            shape: Tuple[int, ...] = (int(v.rows),) if v.ndim == 1 else (int(v.rows), int(v.width))
            if self._window > 1:  # windows: [windows, steps, ...]
                shape = (shape[0] // self._window, self._window) + shape[1:]
            cols.append((name, int(ffi.cast("uintptr_t", v.data)), int(v.nbytes), shape,
                         _DTYPES[v.dtype]))
            pinned = bool(v.pinned)
        slot = _Slot()
        arrays: Dict[str, Any] = {}
        empty = int(self._info.rows) == 0
        if empty:
            whole = np.zeros(0, np.uint8)
            for name, _addr, _n, shape, dt in cols:
                arrays[name] = np.zeros(shape, dt)
        else:
            # The columns lie in one slot: one array over the span they cover
            # (its base keeps the slot), each column a typed view into it.
            lo = min(c[1] for c in cols)
            hi = max(c[1] + c[2] for c in cols)
            whole = view_array(slot, ffi.cast("uint8_t *", lo), (hi - lo,), np.uint8,
                               readonly=False)
            for name, addr, nbytes, shape, dt in cols:
                arrays[name] = whole[addr - lo: addr - lo + nbytes].view(dt).reshape(shape)
        if not self._torch:
            return _SlotViews(slot, FeedBatch(arrays, self._info, pinned), (whole,), ())
        import torch  # noqa: PLC0415 - asked for with tensors="torch"
        from torch.utils.dlpack import from_dlpack  # noqa: PLC0415

        # One tensor over the span (through DLPack, no copy) and the columns
        # as views of it: a single storage, whose use count says whether any
        # tensor or view of the batch is still held.
        span = from_dlpack(whole)
        if empty:
            tensors: Dict[str, Any] = {n: torch.from_numpy(a) for n, a in arrays.items()}
        else:
            tensors = {name: span[addr - lo: addr - lo + nbytes].view(
                getattr(torch, _TORCH_DTYPES[dt])).reshape(shape)
                for name, addr, nbytes, shape, dt in cols}
        # (`whole` is reachable only through `span`, whose count covers it.)
        return _SlotViews(slot, FeedBatch(tensors, self._info, pinned), (span,),
                          tuple(tensors.values()))

    def _finish_a_copy(self) -> bool:
        """The consumer holds every slot, some only through copies still
        running: wait for the oldest such batch's copies and give its slot
        back. False when no slot is held that way."""
        for entry in self._handed_out:
            if entry.batch._pending and not entry.held():
                entry.batch._wait_copies()
                self._return_dropped()
                return True
        return False

    def _wait_for_a_release(self) -> bool:
        """(Under the lock.) The consumer holds every slot. An asynchronous
        consumer lets go of a batch by itself: XLA's dispatch returns before
        the step has run and keeps the arrays it was given (and through them
        the batch) until then. Wait, up to ``held_timeout`` seconds, for the
        consumer to let go of one, and give its slot back. False when none
        was let go in that time."""
        if self._held_timeout <= 0:
            return False
        deadline = time.monotonic() + self._held_timeout
        gc.collect()  # batches kept only by reference cycles go first
        pause = 0.0001
        while True:
            before = len(self._handed_out)
            self._return_dropped()
            if len(self._handed_out) < before or self._finish_a_copy():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)  # lets the holder's threads run (and take the GIL)
            pause = min(pause * 2, 0.005)

    def _raise_full(self) -> None:
        msg = last_error()
        if self._held_timeout > 0:
            msg += (f" (next() waited {self._held_timeout:g} s for one to be let go; "
                    f"Feed(held_timeout=...) sets how long)")
        raise FullError(msg, int(_E_FULL))

    def _release_dropped(self, upto: int) -> None:
        """(Under the lock.) Of the first `upto` batches handed out, those the
        consumer no longer holds any part of: their slots go back (one
        library call empties their cells) and they leave the handed-out
        list. An interrupt before the call changes nothing; one after it
        leaves them in the list with empty cells, to leave at the next look."""
        if upto <= 0:
            return
        handed = self._handed_out
        if upto == 1:  # a `for b in feed` loop: the batch before the last
            entry = handed[0]
            if not entry.in_use():
                buf = self._cells
                buf[0] = entry.slot.c
                lib.a2pack_feed_batch_release_cells(buf, 1)
                del handed[0]  # in place: the C part shares the list
            return
        kept, cells = [], []
        for entry in handed[:upto]:
            if entry.in_use():
                kept.append(entry)
            else:
                cells.append(entry.slot.c)
        if cells:
            n = len(cells)
            buf = self._cells
            buf[0:n] = cells
            lib.a2pack_feed_batch_release_cells(buf, n)
            handed[:upto] = kept  # in place: the C part shares the list

    def _return_dropped(self) -> None:
        """(Under the lock.) Give the producers back the slots of batches the
        consumer no longer holds any part of."""
        self._release_dropped(len(self._handed_out))

    # -- state and statistics ----------------------------------------------
    def stats(self) -> Dict[str, Any]:
        """Counters since open: ``batches_served``, ``rows_served``,
        ``consumer_wait_s`` (time ``next()`` waited: the producers were
        behind), ``producer_idle_s`` and ``producer_busy_s`` (summed over the
        producer threads: idle = waiting for a free slot or for the consumer,
        i.e. the consumer was behind), and the ring's shape and position."""
        with self._lock:
            self._check_open()
            self._settle()
            if self._handed_out:
                self._return_dropped()
            return self._stats_locked()

    def _stats_locked(self) -> Dict[str, Any]:
        h = self._check_open()
        s = ffi.new("a2pack_feed_stats *")
        s.size = ffi.sizeof("a2pack_feed_stats")
        check(lib.a2pack_feed_stats_get(h, s))
        return {
            "batches_served": int(s.batches_served), "rows_served": int(s.rows_served),
            "consumer_wait_s": s.consumer_wait_ns / 1e9,
            "producer_idle_s": s.producer_idle_ns / 1e9,
            "producer_busy_s": s.producer_busy_ns / 1e9,
            "epoch": int(s.epoch), "next_batch": int(s.next_batch),
            "batches_per_epoch": int(s.batches_per_epoch), "slot_bytes": int(s.slot_bytes),
            "threads": int(s.threads), "depth": int(s.depth), "slots": int(s.slots),
            "held": int(s.held), "ready": int(s.ready), "pinned": bool(s.pinned),
            "seed": int(s.seed),
            "spared_cpu": None if s.spared_cpu < 0 else int(s.spared_cpu),
        }

    def refresh(self) -> int:
        """A live feed: take in now what was appended and committed until
        this call (waiting for the library to open the folder again), so
        that the next batch sees it; returns the rows the feed reads.
        Raises what went wrong in opening it again (the dataset rebuilt or
        replaced by other rows, damaged), naming it."""
        with self._lock:
            h = self._check_open()
            rows = ffi.new("uint64_t *")
            check(lib.a2pack_feed_refresh(h, rows))
            return int(rows[0])

    def seek(self, epoch: int, batch: int = 0) -> None:
        """Hand out batch ``batch`` of epoch ``epoch`` next, as a loaded
        state would: the batches filled ahead are made again from there;
        batches already taken stay valid. A batch past the epoch's (or the
        feed's last epoch) is refused, changing nothing."""
        with self._lock:
            h = self._check_open()
            self._settle()
            check(lib.a2pack_feed_seek(h, int(epoch), int(batch)))

    def batch_indices(self, batch: int, epoch: Optional[int] = None) -> npt.NDArray[np.int64]:
        """This rank's dataset rows of batch ``batch`` of ``epoch`` (default:
        the epoch of the next batch), nothing gathered; empty past the
        epoch's batches. A prioritized order's are the rows it would draw
        with the priorities of now."""
        with self._lock:
            h = self._check_open()
            epoch = self._epoch_or_next(epoch)
            n = ffi.new("size_t *")
            check(lib.a2pack_feed_batch_indices(h, int(epoch), int(batch), ffi.NULL, n))
            out = np.empty(int(n[0]), np.int64)
            check(lib.a2pack_feed_batch_indices(h, int(epoch), int(batch),
                                                ffi.cast("int64_t *", out.ctypes.data), n))
            return out[:int(n[0])]

    def _epoch_or_next(self, epoch: Optional[int]) -> int:
        """(Under the lock.) `epoch`, or when None the epoch of the batch
        next() hands out next."""
        if epoch is not None:
            return int(epoch)
        self._settle()
        return int(self._stats_locked()["epoch"])

    def shards_info(self, epoch: Optional[int] = None) -> Dict[str, Union[int, float]]:
        """A feed over a sharded dataset (given by its folder): ``rows``,
        ``runs``, ``shards``, ``max_shard_bytes``, ``window_shards``; this
        rank's ``rank_shards`` and ``rank_rows`` in ``epoch`` (default: the
        epoch of the next batch); and the resident shards' counters:
        ``loads``, ``evictions``, ``bytes_read``, ``resident_bytes``,
        ``resident_shards``, ``load_wait_s`` (producers waited for shards),
        ``load_s``."""
        with self._lock:
            h = self._check_open()
            epoch = self._epoch_or_next(epoch)
            i = ffi.new("a2pack_feed_shards_info *")
            i.size = ffi.sizeof("a2pack_feed_shards_info")
            check(lib.a2pack_feed_shards_info_get(h, int(epoch), i))
        out: Dict[str, Union[int, float]] = {f: int(getattr(i, f)) for f, _ in
                                             ffi.typeof(i[0]).fields if f != "size"}
        out["load_wait_s"] = float(i.load_wait_s)
        out["load_s"] = float(i.load_s)
        return out

    def update_priorities(self, indices: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Set the priorities of rows ``indices`` (e.g. a batch's
        ``indices`` column) to ``values`` (e.g. its absolute TD errors);
        thread-safe while the producers draw, and without waiting for a
        draw under way (that batch keeps the priorities it began with; the
        next draw sees these). For a feed opened with ``priority=``."""
        if self._priorities is None:
            raise ValueError("this feed was opened without priority=a2pack.Priorities(...)")
        self._priorities.update(indices, values)

    def state_dict(self) -> Dict[str, Any]:
        """The position after the batches handed out so far: ``state`` (the
        library's versioned bytes, what :meth:`load_state_dict` needs) and,
        for reading, ``epoch`` and ``batch`` of the next batch, ``seed`` and
        ``batch_size``."""
        with self._lock:
            h = self._check_open()
            self._settle()  # a batch never delivered is not counted
            data = ffi.new("uint8_t **")
            n = ffi.new("size_t *")
            check(lib.a2pack_feed_state(h, data, n))
            try:
                raw = bytes(ffi.buffer(data[0], n[0]))
            finally:
                lib.a2pack_free(data[0])
            st = self._stats_locked()
        return {"state": raw, "epoch": st["epoch"], "batch": st["next_batch"],
                "seed": st["seed"], "batches_per_epoch": st["batches_per_epoch"]}

    def load_state_dict(self, state: Union[Mapping[str, Any], bytes]) -> None:
        """Continue from a :meth:`state_dict`: the next batch is the one after
        those handed out when it was taken. Batches filled ahead are dropped;
        batches already taken stay valid. A state of another dataset, row
        selection, batch size or shuffle setting is refused, naming it."""
        raw = state if isinstance(state, (bytes, bytearray, memoryview)) else state["state"]
        raw = bytes(raw)
        with self._lock:
            h = self._check_open()
            self._settle()
            check(lib.a2pack_feed_load_state(h, raw, len(raw)))

    def set_weights(self, weights: Sequence[float]) -> None:
        """A feed over a mix: mix with ``weights`` (one per source) from the
        next batch on. Batches filled ahead are made again; batches already
        taken stay as they were."""
        w = [float(x) for x in weights]
        with self._lock:
            h = self._check_open()
            self._settle()  # a batch never delivered is made again with them
            check(lib.a2pack_feed_set_weights(h, ffi.new("double[]", w or [0.0]), len(w)))

    # -- lifetime --------------------------------------------------------------
    def _check_open(self) -> Any:
        if self._h is None:
            from .errors import ClosedError
            raise ClosedError("the feed was closed")
        return self._h

    def close(self) -> None:
        """Stop and join the producer threads. Batches still held stay valid.
        Waits for a next() running in another thread to return."""
        with self._lock:
            if self._h is None:
                return
            if self._handed_out:
                self._return_dropped()
            # Copies still reading a slot finish before the feed lets go of it.
            for entry in self._handed_out:
                entry.batch._wait_copies()
            # Batches still out keep their slots through their views' bases;
            # the feed lets go of them and of the idle objects (whose memory
            # goes with the ring).
            self._core_close()
            # A batch taken but never delivered (an interrupt as next()
            # returned) holds its slot, and through it the ring, until
            # released here; a next() about to deliver it sees the count
            # move and finds the feed closed.
            self._gen += 1
            _release_cell(self._out)
            self._handed_out.clear()
            self._views.clear()
            self._h = None  # the last reference: its finalizer closes now

    def __enter__(self) -> "Feed":
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a Feed holds library threads and a ring of batches and cannot be "
                        "pickled or copied: save feed.state_dict() (bytes) and continue from it "
                        "with a new Feed's load_state_dict(), in the other process")

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def columns(self) -> Tuple[str, ...]:
        return self._columns

    def __repr__(self) -> str:
        state = "closed" if self._h is None else "open"
        return f"Feed({self._dataset!r}, columns={list(self._columns)}, {state})"


__all__: List[str] = ["Feed", "FeedBatch", "COLUMNS", "DEFAULT_COLUMNS"]
