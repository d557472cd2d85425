"""Packfiles (A2PACK; docs/formats.md, packfiles): many runs in one read-only file.

    with a2pack.PackReader.open("dataset.a2pack") as r:
        len(r); r.kind(0); run = r.decode(0)
        for batch in r.iter_batches(256, shuffle=True, seed=123):
            ...                                   # list[RunV2]
        cols = r.decode_batch_columns([1, 100, 42])  # RunBatch of numpy arrays
        r.to_jsonl("runs.jsonl")
        print(r.stats.count, r.stats.max_len, r.stats.highest_tile_hist)

    a2pack.pack_dir("runs/", "dataset.a2pack", compress="zstd")   # or "lz4": faster to read

Every heavy call crosses the C boundary once (per batch) with the GIL
released (cffi releases it around each C call); decoding and export run on
the library's threads.
"""

from __future__ import annotations

import dataclasses
import os
from types import TracebackType
from typing import (Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence,
                    Tuple, Type, Union)

import numpy as np
import numpy.typing as npt

from ._native import check, ffi, fspath, lib, view_array
from .run import KIND_NAMES, RunBatch, RunV2, _warn_steps

PathLike = Union[str, os.PathLike[str]]
Progress = Optional[Callable[[int, int], Optional[bool]]]
#: Entry indices: a sequence of ints or an integer numpy array.
Indices = Union[Sequence[int], npt.NDArray[np.integer[Any]]]
# (highest tile, runs) pairs and (engine or None, runs) pairs.
_Histograms = Tuple[List[Tuple[int, int]], List[Tuple[Optional[str], int]]]

_COMPRESSION: Dict[Optional[str], int] = {None: lib.A2PACK_PACK_COMPRESS_NONE, "none": lib.A2PACK_PACK_COMPRESS_NONE,
                "zstd": lib.A2PACK_PACK_COMPRESS_ZSTD, "lz4": lib.A2PACK_PACK_COMPRESS_LZ4}
# Index entry flags -> PackEntry.compression.
_ENTRY_COMPRESSION: Dict[int, str] = {lib.A2PACK_PACK_ENTRY_STORED: "none", lib.A2PACK_PACK_ENTRY_ZSTD: "zstd",
                                      lib.A2PACK_PACK_ENTRY_LZ4: "lz4"}
_JSONL_MODES: Dict[str, int] = {"runs": lib.A2PACK_PACK_JSONL_RUNS, "steps": lib.A2PACK_PACK_JSONL_STEPS}


class _Callbacks:
    """Progress / bad-input callbacks for one C call. An exception raised by
    the Python callable stops the operation and is re-raised after it."""

    def __init__(self, progress: Progress = None,
                 on_bad: Optional[Callable[[str, int, str], object]] = None) -> None:
        self.error: Optional[BaseException] = None
        self.progress: Any = ffi.NULL  # cffi callbacks (or NULL) for the C call
        self.on_bad: Any = ffi.NULL
        if progress is not None:
            def _progress(_user: Any, done: int, total: int) -> int:
                if self.error is not None:
                    return 1
                try:
                    return 1 if progress(int(done), int(total)) is False else 0
                except BaseException as e:  # re-raised by check()
                    self.error = e
                    return 1
            self.progress = ffi.callback("int(void *, uint64_t, uint64_t)")(_progress)
        if on_bad is not None:
            def _on_bad(_user: Any, path: Any, status: int, message: Any) -> None:
                try:
                    on_bad(os.fsdecode(ffi.string(path)), int(status),
                           ffi.string(message).decode("utf-8", "replace"))
                except BaseException as e:
                    if self.error is None:
                        self.error = e
            self.on_bad = ffi.callback(
                "void(void *, const char *, a2pack_status, const char *)")(_on_bad)

    def check(self, status: int) -> None:
        if self.error is not None:
            raise self.error
        check(status)


def _indices(indices: Union[Iterable[int], npt.NDArray[np.integer[Any]]]
             ) -> Tuple[npt.NDArray[np.uint64], Any]:
    arr: npt.NDArray[Any] = np.ascontiguousarray(np.asarray(indices, dtype=np.int64).reshape(-1))
    if arr.size and arr.min() < 0:
        raise IndexError(f"negative entry index {int(arr.min())}")
    arr = arr.astype(np.uint64)
    return arr, (ffi.from_buffer("uint64_t[]", arr) if arr.size else ffi.NULL)


class PackEntry(NamedTuple):
    """One index entry as stored."""
    offset: int
    length: int        # stored bytes
    kind: str          # "v1" | "v2"
    compression: str   # "none" | "zstd" | "lz4" (another flags value: its number)
    crc32c: int        # 0 = none
    raw_length: int    # bytes of the run file


class PackStats:
    """Pack statistics: the stats block's fields (read from the pack, or
    computed once when it has none) and, computed from the runs on first
    access and cached, the highest-tile and engine histograms."""

    __slots__ = ("count", "total_steps", "min_len", "max_len", "mean_len", "p50", "p90", "p99",
                 "from_block", "_reader", "_workers", "_hist")
    _hist: Optional[_Histograms]

    def __init__(self, reader: "PackReader", c: Any, workers: int) -> None:
        self.count = int(c.count)
        self.total_steps = int(c.total_steps)
        self.min_len = int(c.min_len)
        self.max_len = int(c.max_len)
        self.mean_len = float(c.mean_len)
        self.p50 = int(c.p50)
        self.p90 = int(c.p90)
        self.p99 = int(c.p99)
        self.from_block = bool(c.from_block)
        self._reader = reader
        self._workers = workers
        self._hist = None

    # Upstream's names for the percentiles (its PackStats.p50_len ...).
    p50_len = property(lambda self: self.p50)
    p90_len = property(lambda self: self.p90)
    p99_len = property(lambda self: self.p99)

    def _histograms(self) -> _Histograms:
        if self._hist is None:
            self._hist = self._reader._histograms(self._workers)
        return self._hist

    @property
    def highest_tile_hist(self) -> Dict[int, int]:
        """meta.highest_tile value -> number of runs."""
        return dict(self._histograms()[0])

    @property
    def engine_counts(self) -> Dict[Optional[str], int]:
        """engine string (None: the run stores none) -> number of runs."""
        return dict(self._histograms()[1])

    def __repr__(self) -> str:
        return (f"PackStats(count={self.count}, total_steps={self.total_steps}, "
                f"min_len={self.min_len}, max_len={self.max_len}, mean_len={self.mean_len:.3f}, "
                f"p50={self.p50}, p90={self.p90}, p99={self.p99})")


class PackReader:
    """A packfile opened for reading (memory-mapped by default).

    Opening checks the header, index and footer CRCs and every entry's bounds
    without reading any payload. Reads check each entry's CRC unless
    `verify=False` (trusted sequential scans). Safe to share between threads.

    With ``mmap=True`` (the default) the file is mapped. If another process
    truncates it meanwhile, reads of entries past its new end (``read``,
    ``decode``, the batch calls, ``validate``) raise CorruptError naming the
    file instead of ending the process with SIGBUS; a view returned by
    :meth:`get_slice` earlier is read by your code, where such a fault still
    ends the process (docs/pack.md, "Files cut short"). Use ``mmap=False``
    for packs that others may rewrite.
    """

    _h: Any  # cffi `a2pack_pack *`; None once closed

    def __init__(self, path: PathLike, *, mmap: bool = True, verify: bool = True) -> None:
        o = ffi.new("a2pack_pack_options *")
        lib.a2pack_pack_options_init(o)
        o.use_mmap = 1 if mmap else 0
        o.verify_crc = 1 if verify else 0
        out = ffi.new("a2pack_pack **")
        check(lib.a2pack_pack_open(fspath(path), o, out))
        self._h = ffi.gc(out[0], lib.a2pack_pack_close)
        self.path = os.fspath(path)
        self._open_kwargs = {"mmap": mmap, "verify": verify}
        self._stats: Dict[int, PackStats] = {}

    # Pickled by path (for spawn-started DataLoader workers, Beam workers):
    # the copy opens the file again with the same options.
    def __reduce__(self) -> Tuple[Callable[[str, Dict[str, bool]], PackReader], Tuple[str, Dict[str, bool]]]:
        return (_reopen_pack, (self.path, self._open_kwargs))

    @classmethod
    def open(cls, path: PathLike, **kw: Any) -> "PackReader":
        return cls(path, **kw)

    def close(self) -> None:
        """Release the file now (arrays viewing it keep their own reference)."""
        self._h = None

    def __enter__(self) -> "PackReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _handle(self) -> Any:
        if self._h is None:
            from .errors import ClosedError
            raise ClosedError(f"{self.path}: the pack reader is closed")
        return self._h

    # -- entries ---------------------------------------------------------------
    def __len__(self) -> int:
        return int(lib.a2pack_pack_len(self._handle))

    def kind(self, i: int) -> str:
        """'v1' or 'v2', as the index says."""
        out = ffi.new("a2pack_run_kind *")
        check(lib.a2pack_pack_kind(self._handle, self._index(i), out))
        return KIND_NAMES[out[0]]

    def entry(self, i: int) -> PackEntry:
        e = ffi.new("a2pack_pack_entry *")
        e.size = ffi.sizeof("a2pack_pack_entry")
        check(lib.a2pack_pack_entry_info(self._handle, self._index(i), e))
        return PackEntry(int(e.offset), int(e.length), KIND_NAMES.get(e.kind, str(e.kind)),
                         _ENTRY_COMPRESSION.get(int(e.flags), str(int(e.flags))),
                         int(e.crc32c), int(e.raw_length))

    def get_slice(self, i: int, verify: Optional[bool] = None) -> npt.NDArray[np.uint8]:
        """Zero-copy read-only uint8 view of entry i's stored bytes (the zstd
        or LZ4 frame for compressed entries). Needs a memory-mapped reader. The view
        is of the mapping: if another process cuts the file short, reading
        the view past the new end ends the process (SIGBUS), as for any
        mapped file; :meth:`read` returns a copy."""
        data = ffi.new("const uint8_t **")
        size = ffi.new("size_t *")
        check(lib.a2pack_pack_get_slice(self._handle, self._index(i), self._flags(verify), data,
                                        size))
        return view_array(self._h, data[0], int(size[0]), np.uint8)

    def read(self, i: int, verify: Optional[bool] = None) -> bytes:
        """Entry i's run file bytes, exactly as packed (decompressed)."""
        data = ffi.new("uint8_t **")
        size = ffi.new("size_t *")
        check(lib.a2pack_pack_read(self._handle, self._index(i), self._flags(verify), data, size))
        try:
            return bytes(ffi.buffer(data[0], size[0]))
        finally:
            lib.a2pack_free(data[0])

    # -- decoding --------------------------------------------------------------
    def decode(self, i: int, verify: Optional[bool] = None) -> RunV2:
        """Entry i as a RunV2 (a v1 run is upgraded)."""
        out = ffi.new("a2pack_run **")
        check(lib.a2pack_pack_decode(self._handle, self._index(i), self._flags(verify), out))
        return _warn_steps(RunV2._adopt(out[0]), f"{self.path}: entry {i}")

    __getitem__ = decode

    def decode_batch(self, indices: Indices, workers: int = 0,
                     verify: Optional[bool] = None) -> List[RunV2]:
        """Decode many entries in parallel (one C call): list[RunV2]."""
        arr, ptr = _indices(indices)
        n = int(arr.size)
        if n == 0:
            return []
        out = ffi.new("a2pack_run *[]", n)
        check(lib.a2pack_pack_decode_runs(self._handle, ptr, n, workers or 0,
                                          self._flags(verify), out))
        return [RunV2._adopt(out[k]) for k in range(n)]

    def decode_batch_columns(self, indices: Indices, workers: int = 0,
                             verify: Optional[bool] = None) -> RunBatch:
        """Decode many entries in parallel into one columnar RunBatch whose
        attributes are numpy arrays (boards, moves, branch_values, ...,
        step_offsets); run r of the batch is entry indices[r]."""
        arr, ptr = _indices(indices)
        out = ffi.new("a2pack_run_batch **")
        check(lib.a2pack_pack_decode_batch(self._handle, ptr, int(arr.size), workers or 0,
                                           self._flags(verify), out))
        return RunBatch(out[0])

    def permutation(self, shuffle: bool = True, seed: Optional[int] = None) -> npt.NDArray[np.uint64]:
        """The epoch order iter_batches uses: 0..len-1, or a permutation that
        depends only on (len, seed)."""
        n = len(self)
        out = np.empty(n, dtype=np.uint64)
        check(lib.a2pack_pack_permutation(self._handle, 1 if shuffle else 0, seed or 0,
                                          ffi.from_buffer("uint64_t[]", out) if n else ffi.NULL,
                                          n))
        return out

    # -- iteration ---------------------------------------------------------------
    def __iter__(self) -> Iterator[RunV2]:
        return self.iter_indices(range(len(self)))

    def iter(self) -> Iterator[RunV2]:
        """Every run in pack order (upstream's name for iter(reader))."""
        return iter(self)

    def iter_indices(self, indices: Iterable[int], workers: Optional[int] = None,
                     chunk: int = 64) -> Iterator[RunV2]:
        """Decode the given entries in order, `chunk` at a time in parallel."""
        buf: List[int] = []
        for i in indices:
            buf.append(int(i))
            if len(buf) == chunk:
                yield from self.decode_batch(buf, workers or 0)
                buf = []
        if buf:
            yield from self.decode_batch(buf, workers or 0)

    def iter_batches(self, batch_size: int, shuffle: bool = False, seed: Optional[int] = None,
                     workers: Optional[int] = None, columns: bool = False,
                     verify: Optional[bool] = None) -> Iterator[Union[List[RunV2], RunBatch]]:
        """An epoch in batches of `batch_size` runs (the last may be short):
        list[RunV2], or RunBatch with columns=True. Which entries form each
        batch depends only on (len, batch_size, shuffle, seed), never on
        `workers`."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if not columns:
            order = self.permutation(shuffle, seed)
            for start in range(0, len(order), batch_size):
                yield self.decode_batch(order[start:start + batch_size], workers or 0, verify)
            return
        o = ffi.new("a2pack_pack_iter_options *")
        lib.a2pack_pack_iter_options_init(o)
        o.batch_size = batch_size
        o.shuffle = 1 if shuffle else 0
        o.seed = seed or 0
        o.workers = workers or 0
        o.flags = self._flags(verify)
        out = ffi.new("a2pack_pack_iter **")
        check(lib.a2pack_pack_iter_open(self._handle, o, out))
        it = ffi.gc(out[0], lib.a2pack_pack_iter_close)
        batch = ffi.new("a2pack_run_batch **")
        while True:
            check(lib.a2pack_pack_iter_next(it, batch, ffi.NULL, ffi.NULL))
            if batch[0] == ffi.NULL:
                return
            yield RunBatch(batch[0])

    # -- whole-pack operations -------------------------------------------------
    def to_jsonl(self, path: PathLike, parallel: bool = True, workers: Optional[int] = None,
                 mode: str = "runs", verify: Optional[bool] = None,
                 progress: Progress = None, durable: bool = False) -> int:
        """Export every run as JSONL (upstream's schema; mode 'runs' or
        'steps'), written atomically; returns the bytes written. The output is
        the same whatever `workers` is. `durable` fsyncs it before the rename
        (off by default, as upstream: the file still appears only complete)."""
        if mode not in _JSONL_MODES:
            raise ValueError(f"mode must be 'runs' or 'steps', not {mode!r}")
        w = (workers or 0) if parallel else 1
        cb = _Callbacks(progress)
        nbytes = ffi.new("uint64_t *")
        cb.check(lib.a2pack_pack_to_jsonl(self._handle, fspath(path), _JSONL_MODES[mode], w,
                                          self._flags(verify) | (lib.A2PACK_PACK_DURABLE if durable else 0),
                                          cb.progress, ffi.NULL, nbytes))
        return int(nbytes[0])

    def validate(self, full: bool = False, workers: int = 0, progress: Progress = None) -> None:
        """Raise the first problem found (the message lists up to 10)."""
        cb = _Callbacks(progress)
        cb.check(lib.a2pack_pack_validate(self._handle, 1 if full else 0, workers, cb.progress,
                                          ffi.NULL))

    @property
    def stats(self) -> PackStats:
        return self.get_stats()

    def get_stats(self, workers: int = 0) -> PackStats:
        if workers not in self._stats:
            c = ffi.new("a2pack_pack_stats *")
            c.size = ffi.sizeof("a2pack_pack_stats")
            check(lib.a2pack_pack_stats_get(self._handle, workers, c))
            self._stats[workers] = PackStats(self, c, workers)
        return self._stats[workers]

    def _histograms(self, workers: int) -> _Histograms:
        h = ffi.new("a2pack_pack_histograms *")
        h.size = ffi.sizeof("a2pack_pack_histograms")
        check(lib.a2pack_pack_histograms_get(self._handle, workers, h))
        tiles = [(int(h.tile_values[k]), int(h.tile_counts[k])) for k in range(h.n_tiles)]
        engines: List[Tuple[Optional[str], int]] = []
        for k in range(h.n_engines):
            name: Optional[str] = None
            if h.engine_present[k]:
                a, b = int(h.engine_offsets[k]), int(h.engine_offsets[k + 1])
                name = ffi.unpack(h.engine_bytes + a, b - a).decode("utf-8")
            engines.append((name, int(h.engine_counts[k])))
        return tiles, engines

    # -- helpers ---------------------------------------------------------------
    @staticmethod
    def _index(i: int) -> int:
        i = int(i)
        if i < 0:
            raise IndexError(f"negative entry index {i}")
        return i

    @staticmethod
    def _flags(verify: Optional[bool]) -> int:
        return lib.A2PACK_PACK_NO_VERIFY if verify is False else 0

    def __repr__(self) -> str:
        return f"PackReader({self.path!r}, entries={len(self) if self._h is not None else 'closed'})"


def _reopen_pack(path: str, kwargs: Dict[str, bool]) -> PackReader:
    return PackReader(path, **kwargs)


@dataclasses.dataclass(frozen=True)
class PackBuildSummary:
    entries: int
    skipped: int
    input_bytes: int
    stored_bytes: int
    compressed_entries: int
    file_bytes: int
    skipped_paths: List[str] = dataclasses.field(default_factory=list)


def _writer_options(align: int, compress: Optional[str], zstd_level: int, lz4_level: int,
                    entry_crc: bool, expected_count: Optional[int], workers: int,
                    skip_bad: bool) -> Any:
    if compress not in _COMPRESSION:
        raise ValueError(f"compress must be 'none', 'zstd' or 'lz4', not {compress!r}")
    o = ffi.new("a2pack_pack_writer_options *")
    lib.a2pack_pack_writer_options_init(o)
    o.align = align
    o.entry_crc = 1 if entry_crc else 0
    o.compression = _COMPRESSION[compress]
    o.zstd_level = zstd_level
    o.lz4_level = lz4_level
    o.expected_count = expected_count or 0
    o.workers = workers or 0
    o.skip_bad = 1 if skip_bad else 0
    return o


def _summary(c: Any, skipped_paths: Iterable[str]) -> PackBuildSummary:
    return PackBuildSummary(int(c.entries), int(c.skipped), int(c.input_bytes),
                            int(c.stored_bytes), int(c.compressed_entries), int(c.file_bytes),
                            list(skipped_paths))


class PackWriter:
    """Builds a packfile, streaming: payloads are never all held in memory.
    Nothing appears at `path` until finish() (a `with` block finishes on
    success and abandons the pack on an exception).

    Pass `expected_count` when the number of runs is known to write payloads
    in place; otherwise they are staged in a temporary file and copied once.
    `compress`: "none", "zstd" (smaller; `zstd_level`) or "lz4" (faster to
    read; `lz4_level`: 0 = LZ4's fast mode, negative = faster, 3..12 = LZ4
    HC); an entry that does not shrink is stored.
    An `s3://` or `gs://` path is one streamed upload that appears only at
    finish() (docs/storage.md).
    """

    def __init__(self, path: PathLike, *, align: int = 4096, compress: Optional[str] = "none",
                 zstd_level: int = 3, entry_crc: bool = True,
                 expected_count: Optional[int] = None, workers: int = 0,
                 skip_bad: bool = False, lz4_level: int = 0) -> None:
        self._skipped: List[str] = []
        self._cb = _Callbacks(on_bad=lambda p, _s, _m: self._skipped.append(p))
        o = _writer_options(align, compress, zstd_level, lz4_level, entry_crc, expected_count,
                            workers, skip_bad)
        o.on_bad_input = self._cb.on_bad
        out = ffi.new("a2pack_pack_writer **")
        check(lib.a2pack_pack_writer_open(fspath(path), o, out))
        self._h: Any = ffi.gc(out[0], lib.a2pack_pack_writer_close)
        self.path = os.fspath(path)
        self.summary: Optional[PackBuildSummary] = None

    def add(self, run: Union[bytes, bytearray, memoryview, RunV2]) -> None:
        """Append one run: its file bytes (v1 or v2, checked by a full
        decode), or a RunV2 (stored as v2)."""
        data = run.to_bytes("v2") if isinstance(run, RunV2) else run
        buf = ffi.from_buffer(data)
        check(lib.a2pack_pack_writer_add(self._handle, buf, len(buf)))

    def add_file(self, path: PathLike) -> None:
        check(lib.a2pack_pack_writer_add_file(self._handle, fspath(path)))

    def add_files(self, paths: Sequence[PathLike], progress: Progress = None) -> List[str]:
        """Append run files, read and checked in parallel, in the given order.
        With skip_bad, returns the paths skipped by this call."""
        before = len(self._skipped)
        keep = [ffi.new("char[]", fspath(p)) for p in paths]
        arr = ffi.new("const char *[]", keep) if keep else ffi.NULL
        cb = _Callbacks(progress)
        self._cb.error = None
        cb.check(lib.a2pack_pack_writer_add_files(self._handle, arr, len(keep), cb.progress,
                                                  ffi.NULL))
        self._cb.check(0)
        return self._skipped[before:]

    def __len__(self) -> int:
        return int(lib.a2pack_pack_writer_count(self._handle))

    def finish(self) -> PackBuildSummary:
        c = ffi.new("a2pack_pack_build_summary *")
        c.size = ffi.sizeof("a2pack_pack_build_summary")
        check(lib.a2pack_pack_writer_finish(self._handle, c))
        self.summary = _summary(c, self._skipped)
        self.close()
        return self.summary

    def close(self) -> None:
        """Release the writer; an unfinished pack is abandoned."""
        self._h = None

    @property
    def _handle(self) -> Any:
        if self._h is None:
            from .errors import ClosedError
            raise ClosedError(f"{self.path}: the pack writer is finished or closed")
        return self._h

    def __enter__(self) -> "PackWriter":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc_type is None and self._h is not None:
            self.finish()
        else:
            self.close()


def pack_dir(input_dir: PathLike, output: PathLike, *, align: int = 4096,
             compress: Optional[str] = "none", zstd_level: int = 3, entry_crc: bool = True,
             workers: int = 0, skip_bad: bool = False,
             progress: Progress = None, lz4_level: int = 0) -> PackBuildSummary:
    """Pack every *.a2run2 file under `input_dir` (recursively, in path
    order) into `output`, as `a2pack pack` does. `compress` and the levels
    as for :class:`PackWriter`."""
    skipped: List[str] = []
    cb = _Callbacks(progress, on_bad=lambda p, _s, _m: skipped.append(p))
    o = _writer_options(align, compress, zstd_level, lz4_level, entry_crc, 0, workers, skip_bad)
    o.on_bad_input = cb.on_bad
    c = ffi.new("a2pack_pack_build_summary *")
    c.size = ffi.sizeof("a2pack_pack_build_summary")
    cb.check(lib.a2pack_pack_dir(fspath(input_dir), fspath(output), o, cb.progress, ffi.NULL, c))
    return _summary(c, skipped)
