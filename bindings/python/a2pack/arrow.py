"""Arrow interop: the Arrow PyCapsule interface, ``to_arrow`` and ``to_parquet``.

The library exports its data through the Arrow C Data Interface (the
``a2pack_*_export_arrow*`` functions of a2pack.h); this module wraps those
exports in PyCapsules, so any Arrow consumer imports them without a copy::

    import pyarrow as pa, polars as pl, duckdb
    batch = pack.decode_batch_columns(range(100))
    pa.record_batch(batch)                 # zero-copy views of the batch
    pl.DataFrame(ds)                        # every row of a dataset
    duckdb.sql("select move, count(*) from ds group by move")

What gets the interface (attached to the classes when a2pack is imported):

- :class:`~a2pack.RunBatch`: ``__arrow_c_array__`` / ``__arrow_c_schema__``
  (steps layout, zero-copy) and ``__arrow_c_stream__``; ``.arrow(layout)``
  for the runs layout.
- :class:`~a2pack.Dataset`: ``__arrow_c_stream__`` (every row, streamed in
  chunks), ``to_arrow``, ``to_parquet``, ``arrow_gather(indices)``.
- :class:`~a2pack.PackReader`: ``__arrow_c_stream__`` (runs layout),
  ``to_arrow``, ``to_parquet``, ``arrow_entries()``, ``arrow_stats()``.
- :class:`a2pack.bag.Reader`: ``__arrow_c_stream__`` (one ``record`` column).
- :class:`~a2pack.LogData`: ``__arrow_c_array__`` / ``__arrow_c_stream__``.

``__arrow_c_array__`` and ``__arrow_c_schema__`` need nothing but this
package. ``__arrow_c_stream__`` is the library's own stream for datasets and
packs; for the others it is a pyarrow RecordBatchReader over the same
zero-copy batches (pyarrow, the ``parquet`` extra, must be installed).
"""

from __future__ import annotations

import ctypes
import os
import sqlite3
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._native import check, ffi, lib

PathLike = Union[str, "os.PathLike[str]"]
Score = Optional[Tuple[Optional[int], Optional[int]]]
Progress = Optional[Callable[[int, int], Any]]

# ------------------------------------------------------------------ capsules
# The capsule names the interface requires (kept alive here: a capsule keeps
# only a pointer to its name).
_SCHEMA = b"arrow_schema"
_ARRAY = b"arrow_array"
_STREAM = b"arrow_array_stream"

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.restype = None
_libc.free.argtypes = [ctypes.c_void_p]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# The destructor receives the dying capsule as a bare address (a py_object
# argument would take a new reference to an object being freed).
_capsule_ptr = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _destructor(name: bytes, ctype: str) -> Any:
    """A capsule destructor that releases the struct unless a consumer moved
    it out (release set to NULL, as the spec asks of consumers), then frees
    the struct's memory."""

    def destroy(capsule: int) -> None:
        try:
            p = _capsule_ptr(capsule, name)
            if not p:
                return
            s = ffi.cast(ctype, p)
            if s.release != ffi.NULL:
                s.release(s)
            _libc.free(p)
        except Exception:  # pragma: no cover - interpreter shutdown: module globals gone
            pass

    return _DESTRUCTOR(destroy)


_SCHEMA_DTOR = _destructor(_SCHEMA, "struct ArrowSchema *")
_ARRAY_DTOR = _destructor(_ARRAY, "struct ArrowArray *")
_STREAM_DTOR = _destructor(_STREAM, "struct ArrowArrayStream *")


def _alloc(ctype: str) -> int:
    n = ffi.sizeof(ctype)
    p = _libc.malloc(n)
    if not p:
        raise MemoryError(f"cannot allocate {ctype}")
    ctypes.memset(p, 0, n)
    return int(p)


def _capsule(p: int, name: bytes, dtor: Any) -> object:
    return _capsule_new(p, name, ctypes.cast(dtor, ctypes.c_void_p))


def export_pair(fn: Any, *args: Any) -> Tuple[object, object]:
    """Call an ``a2pack_*_export_arrow`` function (its last two arguments are
    the ArrowSchema and ArrowArray to fill) and wrap the result in the
    ``(arrow_schema, arrow_array)`` capsules of ``__arrow_c_array__``."""
    sp, ap = _alloc("struct ArrowSchema"), _alloc("struct ArrowArray")
    try:
        check(fn(*args, ffi.cast("struct ArrowSchema *", sp), ffi.cast("struct ArrowArray *", ap)))
    except BaseException:
        _libc.free(sp)
        _libc.free(ap)
        raise
    return _capsule(sp, _SCHEMA, _SCHEMA_DTOR), _capsule(ap, _ARRAY, _ARRAY_DTOR)


def export_stream(fn: Any, *args: Any) -> object:
    """As :func:`export_pair` for functions that fill an ArrowArrayStream."""
    p = _alloc("struct ArrowArrayStream")
    try:
        check(fn(*args, ffi.cast("struct ArrowArrayStream *", p)))
    except BaseException:
        _libc.free(p)
        raise
    return _capsule(p, _STREAM, _STREAM_DTOR)


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError as e:  # pragma: no cover - pyarrow is in the test extra
        raise ImportError("a2pack: this Arrow export needs pyarrow (pip install pyarrow, or "
                          "the a2pack[parquet] extra)") from e
    return pyarrow


class ArrowBatch:
    """One exported record batch: hand it to ``pyarrow.record_batch``,
    ``pyarrow.table``, ``polars.DataFrame`` or DuckDB. Each export is made
    when a consumer asks (capsules are single-use), from ``make()`` which
    returns the capsule pair."""

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[], Tuple[object, object]]) -> None:
        self._make = make

    def __arrow_c_array__(self, requested_schema: object = None) -> Tuple[object, object]:
        return self._make()

    def __arrow_c_schema__(self) -> object:
        return self._make()[0]

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        pa = _pyarrow()
        rb = pa.record_batch(self)
        return pa.RecordBatchReader.from_batches(rb.schema, [rb]).__arrow_c_stream__(
            requested_schema)

    def to_pyarrow(self) -> Any:
        return _pyarrow().record_batch(self)


class ArrowStream:
    """A stream of record batches made by ``make()`` (returns a stream
    capsule) - what ``__arrow_c_stream__`` hands out."""

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[], object]) -> None:
        self._make = make

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._make()


def _reader_stream(schema: Any, batches: Iterator[Any]) -> Any:
    """A pyarrow RecordBatchReader over `batches` (ArrowBatch objects or
    pyarrow batches), as a stream capsule."""
    pa = _pyarrow()
    it = (b if isinstance(b, pa.RecordBatch) else pa.record_batch(b) for b in batches)
    return pa.RecordBatchReader.from_batches(schema, it)


# ------------------------------------------------------------------ run batches
_LAYOUTS = {"steps": 0, "runs": 1}


def _layout(layout: str) -> int:
    try:
        return _LAYOUTS[layout]
    except KeyError:
        raise ValueError(f"layout must be 'steps' or 'runs', not {layout!r}") from None


def run_batch_arrow(batch: Any, layout: str = "steps") -> ArrowBatch:
    """A RunBatch as an Arrow record batch (``layout`` 'steps' or 'runs');
    board, move, legal_mask, ev_values, has_ev (steps) and every run column
    but ``run`` are zero-copy views that keep the batch alive."""
    code = _layout(layout)
    h = batch._h
    return ArrowBatch(lambda: export_pair(lib.a2pack_run_batch_export_arrow, h, code))


def _run_batch_array(self: Any, requested_schema: object = None) -> Tuple[object, object]:
    return export_pair(lib.a2pack_run_batch_export_arrow, self._h, 0)


def _run_batch_schema(self: Any) -> object:
    return _run_batch_array(self)[0]


def _run_batch_stream(self: Any, requested_schema: object = None) -> object:
    return ArrowBatch(lambda: _run_batch_array(self)).__arrow_c_stream__(requested_schema)


# ------------------------------------------------------------------ datasets
def _ds_indices(ds: Any, indices: Any = None, run_ids: Any = None, score: Score = None,
                where: str = "", params: Sequence[Any] = ()) -> Optional[np.ndarray]:
    """Step indices selected by the cheap filters (SQL over metadata.db:
    nothing of the rows is read), or None for every row."""
    clauses: List[str] = []
    args: List[Any] = []
    if where:
        clauses.append(f"({where})")
        args += list(params)
    if run_ids is not None:
        ids = [int(i) for i in np.asarray(run_ids).reshape(-1)]
        if not ids:
            return np.empty(0, np.int64)
        clauses.append("id IN (" + ",".join("?" * len(ids)) + ")")
        args += ids
    if score is not None:
        lo, hi = score
        if lo is not None:
            clauses.append("max_score >= ?")
            args.append(int(lo))
        if hi is not None:
            clauses.append("max_score <= ?")
            args.append(int(hi))
    sel = None
    if clauses:
        sel = ds.filter_sql(" AND ".join(clauses), tuple(args))
    if indices is not None:
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        sel = idx if sel is None else idx[np.isin(idx, sel)]
    return sel


def dataset_gather_arrow(ds: Any, indices: Any, workers: int = 1) -> ArrowBatch:
    """Rows ``indices`` as one record batch (one copy, made at export)."""
    from .dataset import _indices

    idx = _indices(indices)
    handle = ds._handle
    h = ds._check_open()

    def make() -> Tuple[object, object]:
        keep = handle  # noqa: F841 - the rows stay open during the call
        return export_pair(lib.a2pack_dataset_export_arrow, h, ffi.from_buffer("int64_t[]", idx)
                           if idx.size else ffi.NULL, idx.size, workers)
    return ArrowBatch(make)


def dataset_stream(ds: Any, indices: Any = None, chunk_rows: int = 65536,
                   workers: int = 0) -> object:
    """Stream capsule over the dataset's rows (or ``indices``)."""
    h = ds._check_open()
    if indices is None:
        return export_stream(lib.a2pack_dataset_export_arrow_stream, h, ffi.NULL, 0, chunk_rows,
                             workers)
    idx = np.ascontiguousarray(np.asarray(indices, dtype=np.int64).reshape(-1))
    # An empty selection still passes an array: NULL means every row.
    ptr = ffi.from_buffer("int64_t[]", idx if idx.size else np.zeros(1, np.int64))
    return export_stream(lib.a2pack_dataset_export_arrow_stream, h, ptr, idx.size, chunk_rows,
                         workers)


def _runs_table(ds: Any, run_ids: Any = None, score: Score = None, where: str = "",
                params: Sequence[Any] = ()) -> Any:
    """The dataset's ``runs`` table (metadata.db) as a pyarrow Table."""
    pa = _pyarrow()
    ids = ds.run_ids(where, params) if (where or run_ids is not None or score) else None
    if ids is not None and run_ids is not None:
        ids = ids[np.isin(ids, np.asarray(run_ids, dtype=np.int64))]
    if ids is not None and score is not None:
        keep = ds.run_ids(*_score_sql(score))
        ids = ids[np.isin(ids, keep)]
    db = os.path.join(ds.path, "metadata.db")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cur = con.execute("SELECT * FROM runs ORDER BY id")
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
    finally:
        con.close()
    cols: List[Sequence[Any]] = list(zip(*rows)) if rows else [[] for _ in names]
    table = pa.table({n: pa.array(list(c)) for n, c in zip(names, cols)})
    if ids is not None:
        table = table.filter(pa.array(np.isin(np.asarray(table.column("id")), ids)))
    return table


def _score_sql(score: Tuple[Optional[int], Optional[int]]) -> Tuple[str, Tuple[int, ...]]:
    lo, hi = score
    parts: List[str] = []
    args: List[int] = []
    if lo is not None:
        parts.append("max_score >= ?")
        args.append(int(lo))
    if hi is not None:
        parts.append("max_score <= ?")
        args.append(int(hi))
    return " AND ".join(parts), tuple(args)


def dataset_to_arrow(ds: Any, layout: str = "steps", *, indices: Any = None, run_ids: Any = None,
                     score: Score = None, where: str = "", params: Sequence[Any] = (),
                     chunk_rows: int = 65536, workers: int = 0) -> Any:
    """A pyarrow Table of the dataset: ``layout='steps'`` (one row per step:
    board, exponents, move, legal_mask, ev_values, run_id, step_index) or
    ``'runs'`` (metadata.db's runs table). ``run_ids``, ``score=(lo, hi)``
    (max_score bounds, either may be None) and ``where``/``params`` (SQL over
    the runs table) are pushed down: only the selected rows are read."""
    pa = _pyarrow()
    _layout(layout)
    if layout == "runs":
        return _runs_table(ds, run_ids, score, where, params)
    sel = _ds_indices(ds, indices, run_ids, score, where, params)
    reader = pa.RecordBatchReader._import_from_c_capsule(
        dataset_stream(ds, sel, chunk_rows, workers))
    return reader.read_all()


def dataset_to_parquet(ds: Any, path: PathLike, layout: str = "steps", *,
                       row_group_size: int = 1 << 20, compression: str = "zstd",
                       progress: Progress = None, **filters: Any) -> int:
    """Write :func:`dataset_to_arrow` as Parquet, streaming row groups of
    ``row_group_size`` rows; returns the rows written. ``progress(done,
    total)`` is called after each row group."""
    pa = _pyarrow()
    import pyarrow.parquet as pq

    _layout(layout)
    if layout == "runs":
        table = _runs_table(ds, filters.get("run_ids"), filters.get("score"),
                            filters.get("where", ""), filters.get("params", ()))
        _write_atomic(path, lambda tmp: pq.write_table(table, tmp, row_group_size=row_group_size,
                                                       compression=compression))
        return int(table.num_rows)
    workers = filters.pop("workers", 0)
    sel = _ds_indices(ds, **filters)
    total = len(ds) if sel is None else int(sel.size)
    reader = pa.RecordBatchReader._import_from_c_capsule(
        dataset_stream(ds, sel, row_group_size, workers))
    done = 0

    def write(tmp: str) -> None:
        nonlocal done
        with pq.ParquetWriter(tmp, reader.schema, compression=compression) as w:
            for b in reader:
                w.write_batch(b, row_group_size=row_group_size)
                done += b.num_rows
                if progress:
                    progress(done, total)
    _write_atomic(path, write)
    return done


def _write_atomic(path: PathLike, write: Callable[[str], None]) -> None:
    """Write to a temporary sibling, then rename: an interrupted export never
    leaves a file that reads as complete."""
    out = os.fspath(path)
    tmp = f"{out}.tmp-{os.getpid()}"
    try:
        write(tmp)
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _dataset_stream_dunder(self: Any, requested_schema: object = None) -> object:
    return dataset_stream(self)


# ------------------------------------------------------------------ packs
def pack_entries_arrow(pack: Any) -> ArrowBatch:
    """The pack's index (entry, offset, length, kind, flags, crc32c,
    raw_length) as one record batch (one copy)."""
    h = pack._handle
    return ArrowBatch(lambda: export_pair(lib.a2pack_pack_export_arrow_entries, h))


def pack_stats_arrow(pack: Any, workers: int = 0) -> Tuple[ArrowBatch, ArrowBatch]:
    """``(stats, highest_tile_histogram)`` as two one-copy record batches."""
    h = pack._handle
    sp, ap = _alloc("struct ArrowSchema"), _alloc("struct ArrowArray")
    hs, ha = _alloc("struct ArrowSchema"), _alloc("struct ArrowArray")
    try:
        check(lib.a2pack_pack_export_arrow_stats(
            h, workers, ffi.cast("struct ArrowSchema *", sp), ffi.cast("struct ArrowArray *", ap),
            ffi.cast("struct ArrowSchema *", hs), ffi.cast("struct ArrowArray *", ha)))
    except BaseException:
        for p in (sp, ap, hs, ha):
            _libc.free(p)
        raise
    pair = (_capsule(sp, _SCHEMA, _SCHEMA_DTOR), _capsule(ap, _ARRAY, _ARRAY_DTOR))
    hist = (_capsule(hs, _SCHEMA, _SCHEMA_DTOR), _capsule(ha, _ARRAY, _ARRAY_DTOR))
    used = [False, False]

    def once(k: int, caps: Tuple[object, object]) -> Callable[[], Tuple[object, object]]:
        def make() -> Tuple[object, object]:
            if used[k]:
                return pack_stats_arrow(pack, workers)[k].__arrow_c_array__()
            used[k] = True
            return caps
        return make
    return ArrowBatch(once(0, pair)), ArrowBatch(once(1, hist))


def _pack_batches(pack: Any, layout: str, entries: Any, batch_runs: int, workers: int,
                  score: Score) -> Iterator[Any]:
    """Record batches of the pack (pyarrow), ``batch_runs`` entries each; the
    ``run`` column is replaced by ``entry`` (the pack entry index)."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    code = _layout(layout)
    order = np.arange(len(pack), dtype=np.uint64) if entries is None else \
        np.asarray(entries, dtype=np.uint64).reshape(-1)
    for start in range(0, len(order), batch_runs):
        ids = order[start:start + batch_runs]
        batch = pack.decode_batch_columns(ids, workers)
        rb = pa.record_batch(run_batch_arrow(batch, layout))
        entry = pa.array(ids, pa.uint64())
        if code == 0:
            entry = pc.take(entry, rb.column("run"))
        rb = rb.set_column(0, "entry", entry)
        if score is not None:
            lo, hi = score
            if code == 1:
                s = rb.column("max_score")
            else:  # each step gets its run's max_score
                s = pa.array(np.repeat(batch.max_score,
                                       np.diff(batch.step_offsets).astype(np.int64)))
            m = pa.array(np.ones(rb.num_rows, bool))
            if lo is not None:
                m = pc.and_(m, pc.greater_equal(s, pa.scalar(int(lo), s.type)))
            if hi is not None:
                m = pc.and_(m, pc.less_equal(s, pa.scalar(int(hi), s.type)))
            rb = rb.filter(m)
        yield rb


def pack_schema(pack: Any, layout: str = "runs") -> Any:
    pa = _pyarrow()
    code = _layout(layout)
    empty = pack.decode_batch_columns([], 1)
    rb = pa.record_batch(ArrowBatch(
        lambda: export_pair(lib.a2pack_run_batch_export_arrow, empty._h, code)))
    return rb.set_column(0, "entry", pa.array([], pa.uint64())).schema


def pack_stream(pack: Any, layout: str = "runs", entries: Any = None, batch_runs: int = 1024,
                workers: int = 0) -> object:
    """The library's stream over the pack (a stream capsule): ``entries`` (or
    every entry) decoded ``batch_runs`` at a time as the consumer reads."""
    h = pack._handle
    code = _layout(layout)
    if entries is None:
        return export_stream(lib.a2pack_pack_export_arrow_stream, h, code, ffi.NULL, 0,
                             batch_runs, workers, 0)
    arr = np.ascontiguousarray(np.asarray(entries, dtype=np.uint64).reshape(-1))
    # An empty selection still passes an array: NULL means every entry.
    ptr = ffi.from_buffer("uint64_t[]", arr if arr.size else np.zeros(1, np.uint64))
    return export_stream(lib.a2pack_pack_export_arrow_stream, h, code, ptr, arr.size,
                         batch_runs, workers, 0)


def pack_reader(pack: Any, layout: str = "runs", *, entries: Any = None, score: Score = None,
                batch_runs: int = 1024, workers: int = 0) -> Any:
    """A pyarrow RecordBatchReader over the pack (``layout`` 'runs' or
    'steps'), decoding ``batch_runs`` entries at a time. ``entries`` (pack
    entry indices) is pushed down: only those entries are decoded;
    ``score=(lo, hi)`` filters on each run's max_score after decoding."""
    if score is None:
        return _pyarrow().RecordBatchReader._import_from_c_capsule(
            pack_stream(pack, layout, entries, batch_runs, workers))
    return _reader_stream(pack_schema(pack, layout),
                          _pack_batches(pack, layout, entries, batch_runs, workers, score))


def pack_to_arrow(pack: Any, layout: str = "runs", **kw: Any) -> Any:
    """The pack as a pyarrow Table (see :func:`pack_reader`)."""
    return pack_reader(pack, layout, **kw).read_all()


def pack_to_parquet(pack: Any, path: PathLike, layout: str = "runs", *,
                    row_group_size: int = 1 << 20, compression: str = "zstd",
                    progress: Progress = None, **kw: Any) -> int:
    """Write the pack as Parquet (streaming; temporary file renamed into
    place when complete); returns the rows written. ``progress(done_entries,
    total_entries)`` is called after each decoded batch."""
    _pyarrow()
    import pyarrow.parquet as pq

    entries = kw.get("entries")
    total = len(pack) if entries is None else len(np.asarray(entries).reshape(-1))
    batch_runs = kw.get("batch_runs", 1024)
    rows = 0

    def write(tmp: str) -> None:
        nonlocal rows
        reader = pack_reader(pack, layout, **kw)
        done = 0
        with pq.ParquetWriter(tmp, reader.schema, compression=compression) as w:
            for b in reader:
                w.write_batch(b, row_group_size=row_group_size)
                rows += b.num_rows
                done = min(total, done + batch_runs)
                if progress:
                    progress(done, total)
    _write_atomic(path, write)
    return rows


def _pack_stream_dunder(self: Any, requested_schema: object = None) -> object:
    return pack_stream(self)


# ------------------------------------------------------------------ bag readers
def bag_batch_arrow(reader_handle_ptr: Any, start: int, n: int, workers: int = 0) -> Any:
    """Records [start, start+n) of a bag reader as a pyarrow RecordBatch with
    one large_binary column ``record`` - zero-copy: the batch owns the
    library's read buffer."""
    pa = _pyarrow()
    out = ffi.new("a2pack_bag_batch **")
    check(lib.a2pack_bag_reader_read_range(reader_handle_ptr, start, n, workers, out))
    b = out[0]
    try:
        caps = export_pair(lib.a2pack_bag_batch_export_arrow, b)
    except BaseException:
        lib.a2pack_bag_batch_close(b)
        raise
    return pa.RecordBatch._import_from_c_capsule(*caps)


def bag_reader(reader: Any, batch_records: int = 4096, workers: int = 0) -> Any:
    """A pyarrow RecordBatchReader over every record of a bag Reader (a
    ``record`` large_binary column), ``batch_records`` records per batch."""
    pa = _pyarrow()
    h = reader._h
    if getattr(reader, "_step", 1) != 1:
        raise ValueError("Arrow export of a strided bag slice is not supported; "
                         "read the records instead")
    first = getattr(reader, "_start", 0)
    n = len(reader)

    def gen() -> Iterator[Any]:
        for s in range(0, n, batch_records):
            yield bag_batch_arrow(h.ptr, first + s, min(batch_records, n - s), workers)
    return pa.RecordBatchReader.from_batches(pa.schema([("record", pa.large_binary(),
                                                        False)]), gen())


def _bag_stream_dunder(self: Any, requested_schema: object = None) -> object:
    return bag_reader(self).__arrow_c_stream__(requested_schema)


# ------------------------------------------------------------------ logs
def _log_array(self: Any, requested_schema: object = None) -> Tuple[object, object]:
    return export_pair(lib.a2pack_logger_data_export_arrow, self._h)


def _log_schema(self: Any) -> object:
    return _log_array(self)[0]


def _log_stream(self: Any, requested_schema: object = None) -> object:
    return ArrowBatch(lambda: _log_array(self)).__arrow_c_stream__(requested_schema)


# ------------------------------------------------------------------ hooks
def _install() -> None:
    """Attach the interface to the classes (called once on import)."""
    from .run import RunBatch
    from .dataset import Dataset
    from .pack import PackReader
    from .logger import LogData
    from . import bag

    # setattr: the methods are added to classes defined elsewhere.
    attach: Dict[type, Dict[str, Any]] = {
        RunBatch: {"__arrow_c_array__": _run_batch_array, "__arrow_c_schema__": _run_batch_schema,
                   "__arrow_c_stream__": _run_batch_stream, "arrow": run_batch_arrow},
        Dataset: {"__arrow_c_stream__": _dataset_stream_dunder, "to_arrow": dataset_to_arrow,
                  "to_parquet": dataset_to_parquet, "arrow_gather": dataset_gather_arrow},
        PackReader: {"__arrow_c_stream__": _pack_stream_dunder, "to_arrow": pack_to_arrow,
                     "to_parquet": pack_to_parquet, "arrow_reader": pack_reader,
                     "arrow_stream": pack_stream, "arrow_entries": pack_entries_arrow,
                     "arrow_stats": pack_stats_arrow},
        bag.Reader: {"__arrow_c_stream__": _bag_stream_dunder, "arrow_reader": bag_reader},
        LogData: {"__arrow_c_array__": _log_array, "__arrow_c_schema__": _log_schema,
                  "__arrow_c_stream__": _log_stream},
    }
    for cls, methods in attach.items():
        for name, fn in methods.items():
            setattr(cls, name, fn)


_install()
