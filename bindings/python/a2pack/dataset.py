"""Step datasets: steps.npy + metadata.db + manifest.json (docs/dataset.md).

A dataset folder holds one 32-byte row per game step in ``steps.npy`` (plain
``np.load`` reads it, dtype :data:`STEP_DTYPE`), one row per run in
``metadata.db`` (SQLite, upstream's ``runs`` table) and ``manifest.json``
(row and run counts and the CRC32C of the rows: the commit record).

:class:`Dataset` loads the rows into RAM once and serves batches: every
gather crosses into the library once per batch, never once per row.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple,
                    Union)

import numpy as np
import numpy.typing as npt

from . import _query
from ._native import check, ffi, fspath, lib, view_array

if TYPE_CHECKING:
    from .run import RunV2

#: The exact row dtype of steps.npy (docs/dataset.md): 32 bytes, packed.
STEP_DTYPE = np.dtype([
    ("board", "<u8"),
    ("move", "u1"),
    ("ev_legal", "u1"),
    ("ev_values", "<f4", (4,)),
    ("run_id", "<u4"),
    ("step_index", "<u2"),
])
assert STEP_DTYPE.itemsize == 32

PathLike = Union[str, os.PathLike[str]]
Progress = Optional[Callable[[int, int], Optional[bool]]]


# ------------------------------------------------------------------ helpers
_INT64 = np.dtype(np.int64)


def _indices(indices: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Step indices as a contiguous int64 array (no copy when already one)."""
    # Fast path first: a batch call's Python overhead is part of every batch
    # (microseconds against a gather of tens), and the usual argument is
    # already a 1-D contiguous int64 array.
    if type(indices) is np.ndarray and indices.dtype is _INT64 and indices.ndim == 1 \
            and indices.flags.c_contiguous:
        return indices
    a = np.asarray(indices)
    if a.dtype != np.int64:
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"indices must be integers, not {a.dtype}")
        a = a.astype(np.int64)
    return np.ascontiguousarray(a.reshape(-1))


# ffi.from_buffer rather than ndarray.ctypes.data: the latter costs several
# microseconds a call, as much as gathering a thousand cached rows. The C
# types are looked up once (by name each call costs another ~0.4 us).
_I64_ARRAY = ffi.typeof("int64_t[]")
_CHAR_ARRAY = ffi.typeof("char[]")


def _i64_ptr(a: npt.NDArray[np.int64]) -> Any:  # cffi cdata
    return ffi.from_buffer(_I64_ARRAY, a) if a.size else ffi.NULL


def _ptr(cdecl: Any, a: npt.NDArray[Any]) -> Any:  # cffi cdata
    return ffi.from_buffer(cdecl, a, require_writable=True)


class _Params:
    """`?` parameters as an a2pack_sql_param array (keeps text alive)."""

    def __init__(self, params: Sequence[object]) -> None:
        params = tuple(params or ())
        self.n = len(params)
        self._keep: List[Any] = []
        self.ptr: Any = ffi.new("a2pack_sql_param[]", max(self.n, 1)) if self.n else ffi.NULL
        for i, v in enumerate(params):
            p = self.ptr[i]
            if v is None:
                p.type = lib.A2PACK_SQL_NULL
            elif isinstance(v, (bool, int, np.integer)):
                p.type = lib.A2PACK_SQL_INTEGER
                p.integer = int(v)
            elif isinstance(v, (float, np.floating)):
                p.type = lib.A2PACK_SQL_REAL
                p.real = float(v)
            elif isinstance(v, (str, bytes)):
                b = v.encode() if isinstance(v, str) else v
                buf = ffi.new("char[]", b)
                self._keep.append(buf)
                p.type = lib.A2PACK_SQL_TEXT
                p.text = buf
                p.text_len = len(b)
            else:
                raise TypeError(f"SQL parameter {i} has unsupported type {type(v).__name__}")


def _owned_i64(ptr: Any, n: int) -> npt.NDArray[np.int64]:
    """An owned int64 array from the library as a writable numpy array."""
    if n == 0 or ptr == ffi.NULL:
        return np.zeros(0, dtype=np.int64)
    owner = ffi.gc(ptr, lib.a2pack_free)
    return view_array(owner, owner, (int(n),), np.int64, readonly=False)


def _owned_json(ptr: Any) -> Dict[str, Any]:
    try:
        report: Dict[str, Any] = json.loads(ffi.string(ptr).decode())
        return report
    finally:
        lib.a2pack_free(ptr)


def _sql(where: Optional[str]) -> Any:  # bytes, or a NULL cdata
    return where.encode() if where else ffi.NULL


def _note_callback(notes: List[str]) -> Any:
    """A cffi message callback that appends each message to ``notes``."""
    def note(_user: Any, message: Any) -> None:
        notes.append(ffi.string(message).decode(errors="replace"))
    return ffi.callback("void(void *, const char *)")(note)


def _build_options(workers: int, allow_missing_branches: bool, overwrite: bool,
                   progress: Progress, lock_timeout: Optional[float] = 60.0,
                   skip_bad: bool = False, skipped: Optional[List[Tuple[str, str]]] = None,
                   notes: Optional[List[str]] = None,
                   allow_duplicates: bool = False) -> Tuple[Any, List[Any]]:
    o = ffi.new("a2pack_dataset_build_options *")
    lib.a2pack_dataset_build_options_init(o)
    o.workers = workers
    o.allow_missing_branches = bool(allow_missing_branches)
    o.overwrite = bool(overwrite)
    o.allow_duplicates = bool(allow_duplicates)
    o.lock_timeout_ms = -1 if lock_timeout is None or lock_timeout < 0 else int(lock_timeout * 1000)
    o.skip_bad = bool(skip_bad)
    keep: List[Any] = []  # the cffi callbacks, alive as long as the options
    if progress is not None:
        def on_progress(_user: Any, done: int, total: int) -> int:
            return 1 if progress(int(done), int(total)) is False else 0
        cb = ffi.callback("int(void *, uint64_t, uint64_t)")(on_progress)
        o.progress = cb
        keep.append(cb)

    # Content another tool wrote that the append adopted: a Python warning.
    def warn(_user: Any, message: Any) -> None:
        warnings.warn(ffi.string(message).decode(errors="replace"), UserWarning, stacklevel=3)
    on_warning = ffi.callback("void(void *, const char *)")(warn)
    o.on_warning = on_warning
    keep.append(on_warning)
    if notes is not None:
        on_note = _note_callback(notes)
        o.on_note = on_note
        keep.append(on_note)
    if skipped is not None:
        def note_bad(_user: Any, label: Any, status: int, message: Any) -> None:
            skipped.append((ffi.string(label).decode(errors="replace"),
                            ffi.string(message).decode(errors="replace")))
        on_bad = ffi.callback("void(void *, const char *, a2pack_status, const char *)")(note_bad)
        o.on_bad_input = on_bad
        keep.append(on_bad)
    return o, keep


def _result(r: Any, skipped: Optional[List[Tuple[str, str]]] = None,
            notes: Optional[List[str]] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {"runs_added": r.runs_added, "rows_added": r.rows_added,
           "total_runs": r.total_runs, "total_rows": r.total_rows,
           "runs_skipped": r.runs_skipped, "runs_adopted": r.runs_adopted,
           "steps_copied": bool(r.steps_copied), "runs_duplicated": r.runs_duplicated,
           "digests_recorded": r.digests_recorded, "notes": list(notes or [])}
    if skipped is not None:
        out["skipped"] = skipped
    return out


# ------------------------------------------------------------------ build
def build_dataset(input: PathLike, out_dir: PathLike, *, workers: int = 0,
                  allow_missing_branches: bool = False, overwrite: bool = False,
                  progress: Progress = None, skip_bad: bool = False,
                  lock_timeout: Optional[float] = 60.0, shard_rows: int = 0,
                  allow_duplicates: bool = False) -> Dict[str, Any]:
    """Build a dataset folder from a folder of .a2run2 files or a packfile.

    Atomic: on any error nothing is left under ``out_dir`` (or the previous
    dataset, with ``overwrite``). Runs without branch values raise
    InvalidArgumentError naming the file unless ``allow_missing_branches``.
    ``progress(done, total)`` may return False to stop. ``skip_bad`` skips
    runs that cannot be read or decoded; the result's ``skipped`` lists
    (label, message) for each. ``shard_rows`` > 0 writes the sharded layout
    (shards of whole runs of at most that many rows, for datasets larger
    than RAM: :class:`a2pack.ShardStream`). With ``overwrite`` the folder
    must be empty or a dataset (an a2pack manifest, or upstream's steps.npy
    and metadata.db, and no other files); otherwise InvalidArgumentError
    says why. Returns the counts, and ``notes``: the folders that builds of
    ``out_dir`` which died left beside it, removed or left alone and why.

    Runs that repeat another run of the input (the same content digest:
    boards, moves and metadata, docs/dataset.md "Run digests") raise
    InvalidArgumentError saying how many and which, and nothing is written,
    unless ``allow_duplicates`` (the result's ``runs_duplicated`` counts them).
    """
    skipped: Optional[List[Tuple[str, str]]] = [] if skip_bad else None
    notes: List[str] = []
    o, _cb = _build_options(workers, allow_missing_branches, overwrite, progress,
                            lock_timeout, skip_bad, skipped, notes, allow_duplicates)
    o.shard_rows = int(shard_rows)
    r = ffi.new("a2pack_dataset_build_result *")
    r.size = ffi.sizeof("a2pack_dataset_build_result")
    check(lib.a2pack_dataset_build(fspath(input), fspath(out_dir), o, r))
    return _result(r, skipped, notes)


def append_dataset(dataset_dir: PathLike, input: PathLike, *, workers: int = 0,
                   allow_missing_branches: bool = False, progress: Progress = None,
                   skip_bad: bool = False, lock_timeout: Optional[float] = 60.0,
                   copy: bool = False, shard_rows: int = 0,
                   allow_duplicates: bool = False) -> Dict[str, Any]:
    """Append runs to a dataset, atomically (fresh run ids; see docs/dataset.md).

    steps.npy is extended in place: the append writes the new rows, its
    header and metadata.db's new runs, whatever the dataset's size. With
    ``copy`` it writes a new steps.npy instead (the old rows copied, then
    renamed into place), for folders that programs other than a2pack read
    while appends run (they keep the old file); the result's
    ``steps_copied`` says which happened.

    Waits up to ``lock_timeout`` seconds (None: no limit) for readers that
    are loading the dataset. Runs another tool appended without updating the
    manifest are adopted, with a ``UserWarning`` naming them.

    A sharded dataset gets new shards (of ``shard_rows`` rows at most, 0:
    the dataset's size) and no existing shard is touched. The result's
    ``notes`` say what the append's recovery did first, if anything.

    Runs the dataset already holds, or that repeat another run of this
    append (the same content digest: boards, moves and metadata,
    docs/dataset.md "Run digests"), raise InvalidArgumentError saying how
    many and which, and nothing is changed, unless ``allow_duplicates``
    (the result's ``runs_duplicated`` counts them). Existing runs without a digest (a
    dataset written before a2pack recorded them) get one first, once: the
    result's ``digests_recorded``."""
    return _append(lambda o, r: lib.a2pack_dataset_append(fspath(dataset_dir), fspath(input),
                                                         o, r),
                   workers, allow_missing_branches, progress, skip_bad, lock_timeout, copy,
                   shard_rows, allow_duplicates)


def _append(call: Callable[[Any, Any], int], workers: int, allow_missing_branches: bool,
            progress: Progress, skip_bad: bool, lock_timeout: Optional[float], copy: bool,
            shard_rows: int, allow_duplicates: bool) -> Dict[str, Any]:
    skipped: Optional[List[Tuple[str, str]]] = [] if skip_bad else None
    notes: List[str] = []
    o, _cb = _build_options(workers, allow_missing_branches, False, progress,
                            lock_timeout, skip_bad, skipped, notes, allow_duplicates)
    o.copy_steps = bool(copy)
    o.shard_rows = int(shard_rows)
    r = ffi.new("a2pack_dataset_build_result *")
    r.size = ffi.sizeof("a2pack_dataset_build_result")
    check(call(o, r))
    return _result(r, skipped, notes)


# A run for append_runs: its bytes (or a RunV2), or (file, offset, length).
RunBytes = Union[bytes, bytearray, memoryview, "RunV2", Tuple[PathLike, int, int]]


def append_runs(dataset_dir: PathLike, runs: Sequence[RunBytes], *,
                labels: Optional[Sequence[str]] = None, source: str = "python",
                source_kind: str = "python", workers: int = 0,
                allow_missing_branches: bool = False, progress: Progress = None,
                skip_bad: bool = False, lock_timeout: Optional[float] = 60.0,
                copy: bool = False, shard_rows: int = 0,
                allow_duplicates: bool = False) -> Dict[str, Any]:
    """Append runs held in memory - a game loop's ``RunV2`` objects or the
    bytes of run files - to a dataset, in the order given, exactly as
    :func:`append_dataset` appends a folder of those runs (the same locking,
    recovery, duplicate checks and atomic commit; the same files but for the
    manifest, whose source is ``source``/``source_kind``). A run may also be
    ``(path, offset, length)``: that range of a file (a run file, or a file
    of runs end to end), read by the library. ``labels`` name the runs in
    errors and in the result's ``skipped`` (default ``"run <i>"``). The
    options are :func:`append_dataset`'s."""
    runs = list(runs)
    if labels is not None and len(labels) != len(runs):
        raise ValueError(f"append_runs: {len(runs)} runs but {len(labels)} labels")
    arr = ffi.new("a2pack_dataset_run_bytes[]", max(len(runs), 1))
    keep: List[Any] = []  # the cdata the array points into, alive for the call
    for i, run in enumerate(runs):
        e = arr[i]
        if isinstance(run, tuple):
            path, offset, length = run
            p = ffi.new("char[]", fspath(path))
            keep.append(p)
            e.path, e.offset, e.length = p, int(offset), int(length)
        else:
            data = run.to_bytes("v2") if hasattr(run, "to_bytes") else run
            buf = ffi.from_buffer(data)
            keep.append(buf)
            e.data, e.length = buf, len(buf)
        if labels is not None:
            lab = ffi.new("char[]", str(labels[i]).encode())
            keep.append(lab)
            e.label = lab
    src, kind = source.encode(), source_kind.encode()
    return _append(lambda o, r: lib.a2pack_dataset_append_runs(fspath(dataset_dir), arr, len(runs),
                                                              src, kind, o, r),
                   workers, allow_missing_branches, progress, skip_bad, lock_timeout, copy,
                   shard_rows, allow_duplicates)


def verify_dataset(dataset_dir: PathLike, *, repair: bool = False, workers: int = 0,
                   raise_on_error: bool = True, full: bool = False,
                   discard_unrecorded: bool = False) -> Dict[str, Any]:
    """Check a dataset completely; returns the report dict (ok, rows, runs,
    errors, notes, warnings, actions, duplicates, runs_without_digest).
    Raises the error of the first problem unless ``raise_on_error`` is
    False. ``repair`` first undoes an interrupted append, adopts consistent
    runs another tool appended and records the runs' content digests where
    missing or wrong; ``discard_unrecorded`` (with repair) deletes
    unrecorded runs/rows that cannot be adopted. ``full``: SQLite
    integrity_check, not quick_check.

    Runs that repeat earlier runs of the dataset are an error (raised as
    InvalidArgumentError when nothing else is wrong) unless they were
    written with ``allow_duplicates``; ``duplicates`` has their count
    (``runs``), those written knowingly (``allowed``) and the first 100 as
    ``listed`` ({id, same_as, allowed})."""
    out = ffi.new("char **")
    flags = lib.A2PACK_DATASET_VERIFY_REPAIR if repair else 0
    if full:
        flags |= lib.A2PACK_DATASET_VERIFY_FULL
    if discard_unrecorded:
        flags |= lib.A2PACK_DATASET_VERIFY_DISCARD_UNRECORDED
    status = lib.a2pack_dataset_verify(fspath(dataset_dir), flags, workers, out)
    report = _owned_json(out[0]) if out[0] != ffi.NULL else None
    if status != 0 and (raise_on_error or report is None):
        check(status)
    # The library fills the report whenever it returns A2PACK_OK (a2pack.h).
    assert report is not None, "a2pack_dataset_verify returned OK without a report"
    return report


# ------------------------------------------------------------------ sampler
def _owned_bytes(data: Any, n: Any) -> bytes:
    try:
        return bytes(ffi.buffer(data[0], n[0]))
    finally:
        lib.a2pack_free(data[0])


def _state_bytes(state: Any, key: str, what: str) -> bytes:
    """The library's state bytes out of a state_dict (or the bytes given)."""
    if isinstance(state, (bytes, bytearray, memoryview)):
        return bytes(state)
    if not isinstance(state, dict) or key not in state:
        raise ValueError(f"not a {what} state_dict: expected a dict with {key!r}, got "
                         f"{type(state).__name__}"
                         + (f" with keys {sorted(state)}" if isinstance(state, dict) else ""))
    return bytes(state[key])


class EpochSampler:
    """Batches of a seeded permutation of step indices.

    Epoch ``e``'s order depends only on (seed, e): the same seed gives the
    same batches. Iterating yields int64 arrays of ``batch_size`` indices (the
    last one shorter unless ``drop_last``) for the current epoch; call
    :meth:`set_epoch` between epochs, as with PyTorch's DistributedSampler.

    Elastic ranks: ``batch_size`` is the global batch; with ``world > 1``
    each yielded array is rank ``rank``'s contiguous slice of the global
    batch (:meth:`part`), so the ranks' slices of a step are disjoint and
    make the one-rank batch together, whatever the number of ranks.

    Checkpoints: :meth:`state_dict` is O(1) bytes (seed, epoch, the next
    global batch, and checks of the index set and batch size), independent of
    ``rank`` and ``world``; :meth:`load_state_dict` makes the next iteration
    resume at that batch, on any number of ranks. Iterators have the same
    two methods (what ``torchdata``'s ``StatefulDataLoader`` calls).
    """

    _indices: Optional[npt.NDArray[np.int64]]

    def __init__(self, indices: Optional[npt.ArrayLike] = None, *, n: Optional[int] = None,
                 batch_size: int = 4096, seed: int = 0, drop_last: bool = False,
                 epoch: int = 0, rank: int = 0, world: int = 1) -> None:
        if indices is not None:
            self._indices = _indices(indices)
            self._n = int(self._indices.size)
        elif n is not None:
            self._indices = None
            self._n = int(n)
        else:
            raise ValueError("give indices or n")
        if not 0 <= int(rank) < int(world):
            raise ValueError(f"rank {rank} of a world of {world}: expected 0 <= rank < world")
        self.rank, self.world = int(rank), int(world)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        out = ffi.new("a2pack_dataset_sampler **")
        ptr = ffi.NULL if self._indices is None else _i64_ptr(self._indices)
        if self._indices is not None and self._n == 0:
            ptr = ffi.new("int64_t[1]")  # an empty selection, not "all of 0..n-1"
        check(lib.a2pack_dataset_sampler_open(ptr, self._n, self.seed, self.batch_size,
                                              self.drop_last, out))
        self._h = ffi.gc(out[0], lib.a2pack_dataset_sampler_close)
        self._epoch = 0
        self._next = 0            # next global batch of the latest iteration
        self._resume: Optional[int] = None  # where the next iteration starts, after a load
        self._live: Optional[_SamplerIter] = None
        if epoch:
            self.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Move to ``epoch``; the next iteration starts at its batch 0 -
        except right after :meth:`load_state_dict` of that same epoch, where
        it resumes at the saved batch (so a training loop that calls
        ``set_epoch(e)`` at each epoch's start resumes correctly)."""
        epoch = int(epoch)
        if epoch == self._epoch and self._resume is not None:
            return
        check(lib.a2pack_dataset_sampler_set_epoch(self._h, epoch))
        self._epoch = epoch
        self._resume = None
        self._next = 0

    def __len__(self) -> int:
        return int(lib.a2pack_dataset_sampler_batch_count(self._h))

    @property
    def num_indices(self) -> int:
        return self._n

    def batch(self, b: int) -> npt.NDArray[np.int64]:
        """Global batch ``b`` of the current epoch."""
        out = np.empty(self.batch_size, dtype=np.int64)
        n = ffi.new("size_t *")
        check(lib.a2pack_dataset_sampler_batch(self._h, int(b), _ptr("int64_t[]", out), n))
        return out[: n[0]]

    def part(self, b: int, rank: Optional[int] = None, world: Optional[int] = None
             ) -> npt.NDArray[np.int64]:
        """Rank ``rank`` of ``world``'s slice of global batch ``b``
        (default: this sampler's rank and world)."""
        rank = self.rank if rank is None else int(rank)
        world = self.world if world is None else int(world)
        out = np.empty(self.batch_size, dtype=np.int64)
        n = ffi.new("size_t *")
        check(lib.a2pack_dataset_sampler_part(self._h, int(b), rank, world,
                                              _ptr("int64_t[]", out), n))
        return out[: n[0]]

    def _at(self, b: int) -> npt.NDArray[np.int64]:
        return self.batch(b) if self.world == 1 else self.part(b)

    def __iter__(self) -> "_SamplerIter":
        start = 0 if self._resume is None else self._resume
        self._resume = None
        self._next = start
        self._live = _SamplerIter(self, start)
        return self._live

    # ---- checkpoints
    def state(self, next_batch: int) -> bytes:
        """The library's state bytes for resuming at global batch ``next_batch``."""
        data, n = ffi.new("uint8_t **"), ffi.new("size_t *")
        check(lib.a2pack_dataset_sampler_state(self._h, int(next_batch), data, n))
        return _owned_bytes(data, n)

    def state_dict(self) -> Dict[str, Any]:
        """``{"a2pack_sampler": bytes, "epoch": e, "next_batch": k}``: resume
        at global batch k of epoch e (the bytes are what is restored; the
        other keys are for reading). k is the next batch of the latest
        iteration: a plain DataLoader with workers runs its sampler ahead of
        the batches delivered, so save through ``StatefulDataLoader`` (or
        record the batches consumed and use :meth:`state`)."""
        k = self._next if self._resume is None else self._resume
        return {"a2pack_sampler": self.state(k), "epoch": self._epoch, "next_batch": k}

    def load_state_dict(self, state: Union[Dict[str, Any], bytes]) -> None:
        """Restore :meth:`state_dict` (from any rank or world size): the
        seed, epoch and next batch are the state's. Refused with a clear
        error for a state of another index set, batch size, drop_last or
        format version, or a damaged one."""
        raw = _state_bytes(state, "a2pack_sampler", "sampler")
        nb = ffi.new("uint64_t *")
        check(lib.a2pack_dataset_sampler_load_state(self._h, raw, len(raw), nb))
        self._epoch = int(lib.a2pack_dataset_sampler_epoch(self._h))
        self.seed = int.from_bytes(raw[8:16], "little")
        self._resume = self._next = int(nb[0])

    def __reduce__(self) -> Tuple[Callable[[Optional[npt.NDArray[np.int64]], Dict[str, Any]], EpochSampler],
                                  Tuple[Optional[npt.NDArray[np.int64]], Dict[str, Any]]]:
        args: Dict[str, Any] = dict(n=self._n, batch_size=self.batch_size, seed=self.seed,
                                    drop_last=self.drop_last, epoch=self._epoch,
                                    rank=self.rank, world=self.world)
        return (_make_sampler, (self._indices, args))


class _SamplerIter:
    """One pass over an epoch from a start batch; stateful like its sampler."""

    def __init__(self, sampler: EpochSampler, start: int) -> None:
        self._s = sampler
        self._pos = start

    def __iter__(self) -> "_SamplerIter":
        return self

    def __next__(self) -> npt.NDArray[np.int64]:
        s = self._s
        if self._pos >= len(s):
            raise StopIteration
        out = s._at(self._pos)
        self._pos += 1
        if s._live is self:
            s._next = self._pos
        return out

    def state_dict(self) -> Dict[str, Any]:
        return {"a2pack_sampler": self._s.state(self._pos), "epoch": self._s.epoch,
                "next_batch": self._pos}

    def load_state_dict(self, state: Union[Dict[str, Any], bytes]) -> None:
        self._s.load_state_dict(state)
        self._pos = self._s._next
        self._s._resume = None
        self._s._live = self


def _make_sampler(indices: Optional[npt.NDArray[np.int64]], kwargs: Dict[str, Any]) -> EpochSampler:
    return EpochSampler(indices, **kwargs)


# ------------------------------------------------------------------ dataset
class _Handle:
    """Owns the `a2pack_dataset *`; numpy views of the rows keep it alive, so
    the memory outlives Dataset.close() while any view exists."""

    __slots__ = ("h", "__weakref__")
    h: Any  # cffi `a2pack_dataset *`, closed when collected

    def __init__(self, h: Any) -> None:
        self.h = h


class Dataset:
    """A dataset loaded into memory.

    ``Dataset(path)`` reads the committed rows into RAM (64-byte aligned, on
    huge pages where the kernel allows) with large parallel reads and checks
    them against the manifest's CRC32C. ``mmap=True`` maps steps.npy instead:
    if another process then truncates steps.npy or rewrites it in place (as
    ``np.save`` over it does), the library's reads of rows past the new end
    (``get_batch``, ``get_batch_columns``, a Feed's batches, ``stats``) raise
    CorruptError naming the file instead of ending the process with SIGBUS.
    The :attr:`steps` view is read by numpy and your code, not by the
    library: there such a fault still ends the process. Copy rows out with
    ``get_batch``, or open without ``mmap``, for files others may rewrite
    (docs/dataset.md, "A mapped steps.npy that shrinks").
    Picklable by path: an unpickled copy (e.g. in a DataLoader worker) opens
    the folder again with the same options.
    """

    _handle: Optional[_Handle]
    _steps: Optional[npt.NDArray[np.void]]
    _out_ptr: Tuple[Optional[npt.NDArray[np.void]], Any]

    def __init__(self, path: PathLike, *, mmap: bool = False, verify: bool = True,
                 huge_pages: bool = True, workers: int = 0, allow_extra_files: bool = False) -> None:
        self._path = os.fspath(path)
        self._kwargs = dict(mmap=mmap, verify=verify, huge_pages=huge_pages, workers=workers,
                            allow_extra_files=allow_extra_files)
        o = ffi.new("a2pack_dataset_open_options *")
        lib.a2pack_dataset_open_options_init(o)
        o.mmap = bool(mmap)
        o.verify_crc = bool(verify)
        o.huge_pages = bool(huge_pages)
        o.workers = workers
        o.allow_extra_files = bool(allow_extra_files)
        out = ffi.new("a2pack_dataset **")
        check(lib.a2pack_dataset_open(fspath(path), o, out))
        self._handle = _Handle(ffi.gc(out[0], lib.a2pack_dataset_close))
        info = ffi.new("a2pack_dataset_info *")
        info.size = ffi.sizeof("a2pack_dataset_info")
        check(lib.a2pack_dataset_get_info(self._handle.h, info))
        self._rows = int(info.rows)
        self._runs = int(info.runs)
        self._info: Dict[str, Any] = {
            "rows": self._rows, "runs": self._runs, "next_run_id": int(info.next_run_id),
            "mapped": bool(info.mapped), "huge_pages": bool(info.huge_pages),
            "has_manifest": bool(info.has_manifest), "steps_crc32c": int(info.steps_crc32c),
            "uncommitted_rows": int(info.uncommitted_rows),
        }
        self._steps = view_array(self._handle, info.data, (self._rows,), STEP_DTYPE)
        # The last `out` array get_batch filled and its pointer: a training
        # loop passes the same one every batch, and from_buffer costs ~0.5 us
        # of a ~17 us call. The pointer's buffer export also keeps the array
        # from being resized (numpy refuses while it is exported), so the
        # address stays valid for as long as it is cached.
        self._out_ptr = (None, None)

    # -- pickling: by path -------------------------------------------------
    def __reduce__(self) -> Tuple[Callable[[str, Dict[str, Any]], Dataset], Tuple[str, Dict[str, Any]]]:
        return (_reopen, (self._path, self._kwargs))

    # -- basics --------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    @property
    def steps(self) -> npt.NDArray[np.void]:
        """All committed rows as a read-only structured array (zero-copy view
        of the library's memory, dtype :data:`STEP_DTYPE`). With ``mmap=True``
        that memory is the mapping of steps.npy: reading the view past the
        end of a file another process cut short ends the process (SIGBUS),
        where ``get_batch`` raises."""
        self._check_open()
        steps = self._steps
        assert steps is not None  # close() drops the rows with the handle
        return steps

    @property
    def num_runs(self) -> int:
        return self._runs

    @property
    def info(self) -> Dict[str, Any]:
        return dict(self._info)

    def __len__(self) -> int:
        return self._rows

    def __repr__(self) -> str:
        return f"Dataset({self._path!r}, rows={self._rows}, runs={self._runs})"

    def _check_open(self) -> Any:  # the cffi `a2pack_dataset *`
        if self._handle is None:
            from .errors import ClosedError
            raise ClosedError(f"{self._path}: the dataset was closed")
        return self._handle.h

    def close(self) -> None:
        """Drop this object's hold on the rows; the memory is freed once no
        array returned by :attr:`steps` is alive."""
        self._handle = None
        self._steps = None
        self._out_ptr = (None, None)

    def __enter__(self) -> "Dataset":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- gathers ---------------------------------------------------------------
    def get_batch(self, indices: npt.ArrayLike, *, out: Optional[npt.NDArray[np.void]] = None,
                  workers: int = 1) -> npt.NDArray[np.void]:
        """Rows ``indices`` as a structured array (one call into the library).
        Out-of-range indices raise OutOfRangeError before anything is copied."""
        h = self._check_open()
        idx = _indices(indices)
        n = idx.size
        if out is None:
            out = np.empty(n, STEP_DTYPE)  # positional: the keyword costs 0.7 us more
            optr = ffi.from_buffer(_CHAR_ARRAY, out) if n else ffi.NULL  # fresh: writable
        elif out.dtype != STEP_DTYPE or out.shape != (n,) or not (flags := out.flags).c_contiguous:
            raise ValueError(f"out must be a contiguous ({n},) array of STEP_DTYPE")
        elif out is self._out_ptr[0] and flags.writeable:
            optr = self._out_ptr[1]
        else:
            optr = _ptr(_CHAR_ARRAY, out) if n else ffi.NULL
            self._out_ptr = (out, optr)
        st = lib.a2pack_dataset_gather(h, _i64_ptr(idx), n, optr, workers)
        if st:
            check(st)
        return out

    def get_batch_columns(self, indices: npt.ArrayLike, *, workers: int = 1,
                          out: Optional[Tuple[npt.NDArray[Any], ...]] = None
                          ) -> Tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8],
                                     npt.NDArray[np.bool_], npt.NDArray[np.float32]]:
        """Training arrays for rows ``indices`` in one pass:
        ``(exponents u8[n,16], moves u8[n], legal bool[n,4], ev_values f32[n,4])``.
        ``out`` may give the four arrays to fill (shapes and dtypes as above)."""
        h = self._check_open()
        idx = _indices(indices)
        n = idx.size
        if out is None:
            exps = np.empty((n, 16), np.uint8)
            moves = np.empty(n, np.uint8)
            legal = np.empty((n, 4), np.bool_)
            ev = np.empty((n, 4), np.float32)
        else:
            exps, moves, legal, ev = out
            for a, shape, dt in ((exps, (n, 16), np.uint8), (moves, (n,), np.uint8),
                                 (legal, (n, 4), np.bool_), (ev, (n, 4), np.float32)):
                if a.shape != shape or a.dtype != dt or not a.flags.c_contiguous:
                    raise ValueError(f"out arrays must be contiguous {shape} {np.dtype(dt)}")
        cols = ffi.new("a2pack_dataset_columns *")
        cols.size = ffi.sizeof("a2pack_dataset_columns")
        if n:
            keep = (_ptr("uint8_t[]", exps), _ptr("uint8_t[]", moves),
                    _ptr("uint8_t[]", legal.view(np.uint8)), _ptr("float[]", ev))
            cols.exponents, cols.moves, cols.legal, cols.ev_values = keep
        check(lib.a2pack_dataset_gather_columns(h, _i64_ptr(idx), n, cols, workers))
        return exps, moves, legal, ev

    # -- selection -------------------------------------------------------------
    def filter_sql(self, where: str, params: Sequence[object] = (), *,
                   timeout: Optional[float] = None) -> npt.NDArray[np.int64]:
        """Step indices (int64, ascending) of the runs matching ``where``, an
        SQL expression over metadata.db's ``runs`` columns (id,
        first_step_idx, num_steps, max_score, highest_tile, engine,
        start_time, elapsed_s) with ``?`` placeholders for ``params``.

        Ctrl-C stops a query that runs long (KeyboardInterrupt); so does
        ``timeout`` (seconds), with InterruptedError_ naming the query and
        the deadline. The same holds for :meth:`run_ids` and :meth:`split`."""
        return self._select(lib.a2pack_dataset_select_opts, where, params, timeout)

    def filter_by_score(self, lo: Optional[int] = None,
                        hi: Optional[int] = None) -> npt.NDArray[np.int64]:
        """Step indices of runs with ``lo <= max_score <= hi`` (either bound optional)."""
        if lo is None:
            if hi is None:
                return self.filter_sql("")
            return self.filter_sql("max_score <= ?", (int(hi),))
        if hi is None:
            return self.filter_sql("max_score >= ?", (int(lo),))
        return self.filter_sql("max_score BETWEEN ? AND ?", (int(lo), int(hi)))

    def run_ids(self, where: str = "", params: Sequence[object] = (), *,
                timeout: Optional[float] = None) -> npt.NDArray[np.int64]:
        """Ids (ascending) of the runs matching ``where`` (all when empty)."""
        return self._select(lib.a2pack_dataset_select_runs_opts, where, params, timeout)

    def _select(self, fn: Callable[..., int], where: str, params: Sequence[object],
                timeout: Optional[float] = None) -> npt.NDArray[np.int64]:
        """One SQL selection call (steps or run ids) into an owned int64 array."""
        h = self._check_open()
        p = _Params(params)
        o = _query.options(timeout)
        out = ffi.new("int64_t **")
        n = ffi.new("size_t *")
        check(_query.run(lambda: fn(h, _sql(where), p.ptr, p.n, o, out, n)))
        return _owned_i64(out[0], n[0])

    def split(self, val_fraction: float = 0.1, *, seed: int = 0, where: str = "",
              params: Sequence[object] = (), val_where: Optional[str] = None,
              val_params: Sequence[object] = (), timeout: Optional[float] = None
              ) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Run-disjoint ``(train, val)`` step indices of the runs matching
        ``where``. With ``val_where`` the runs it matches are the validation
        set; otherwise each run goes to validation with probability
        ``val_fraction`` by a hash of (seed, run id), so runs keep their side
        when the dataset grows. Use plain ``?`` placeholders. ``timeout``
        (seconds) bounds the whole call, as for :meth:`filter_sql`."""
        h = self._check_open()
        p, vp = _Params(params), _Params(val_params)
        o = _query.options(timeout)
        tr, ntr = ffi.new("int64_t **"), ffi.new("size_t *")
        va, nva = ffi.new("int64_t **"), ffi.new("size_t *")
        check(_query.run(lambda: lib.a2pack_dataset_split_opts(
            h, _sql(where), p.ptr, p.n, float(val_fraction), seed, _sql(val_where), vp.ptr, vp.n,
            o, tr, ntr, va, nva)))
        return _owned_i64(tr[0], ntr[0]), _owned_i64(va[0], nva[0])

    def sampler(self, indices: Optional[npt.ArrayLike] = None, *, batch_size: int = 4096, seed: int = 0,
                drop_last: bool = False) -> EpochSampler:
        """An :class:`EpochSampler` over ``indices`` (default: every row)."""
        if indices is None:
            return EpochSampler(n=self._rows, batch_size=batch_size, seed=seed,
                                drop_last=drop_last)
        return EpochSampler(indices, batch_size=batch_size, seed=seed, drop_last=drop_last)

    def stats(self, workers: int = 0) -> Dict[str, Any]:
        """Counts and distributions (see ``a2pack dataset stats --json``)."""
        h = self._check_open()
        out = ffi.new("char **")
        check(lib.a2pack_dataset_stats_json(h, workers, out))
        return _owned_json(out[0])


def _reopen(path: str, kwargs: Dict[str, Any]) -> Dataset:
    return Dataset(path, **kwargs)
