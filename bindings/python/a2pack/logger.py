"""Sparse-vector data logger: crash-safe zstd segments, fast decode (docs/logger.md).

::

    import numpy as np
    from a2pack import DataLogger

    with DataLogger("/tmp/run-7") as log:
        sid = log.register_stream({"entity": "cell-3", "measure": "rate"},
                                  epoch_scale=1e-3, value_scale=1e-6)
        log.record(sid, 0.5, np.array([2, 9], np.uint32), np.array([0.25, -1.0]))
        log.flush()                       # durable on disk from here on
        for stream_id, epoch, indices, values in log.decode_all_segments():
            ...
        log.to_parquet("/tmp/run-7.parquet")

Everything runs in liba2pack: ``record`` validates and encodes into a
per-thread buffer and returns (cffi releases the GIL during the call, so many
Python threads can record at once); background threads compress and append to
``<dir>/segments/NNNNN.seg.zst``; ``decode`` reads every segment in parallel
into numpy columns. Folder layout and exact bytes: docs/logger.md.

``python -m a2pack.logger to-parquet DIR OUT`` converts a folder (this is what
``a2pack log to-parquet`` runs).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import errors
from ._native import check, ffi, fspath, lib, view_array

__all__ = ["DataLogger", "LogData", "LogStream", "LogProblem", "DecodeWarning", "decode",
           "to_parquet", "SORT"]

PathLike = Union[str, os.PathLike[str]]
#: A decoded record: (stream id, epoch, indices, values).
Record = Tuple[int, float, npt.NDArray[np.uint32], npt.NDArray[np.float64]]

#: Stream flag: sort each record's (index, value) pairs (A2PACK_LOGGER_SORT).
SORT = int(lib.A2PACK_LOGGER_SORT)

_U32 = np.dtype(np.uint32)
_F64 = np.dtype(np.float64)
_U64 = np.dtype(np.uint64)


class DecodeWarning(UserWarning):
    """A damaged frame (torn tail, bad checksum...) was skipped while decoding."""


@dataclass(frozen=True)
class LogStream:
    """A stream as its sidecar ``streams/<id>.json`` describes it."""

    stream_id: int
    labels: Dict[str, Any]
    epoch_scale: float
    value_scale: float
    sort: bool


@dataclass(frozen=True)
class LogProblem:
    """Something the decoder skipped: the file, the byte offset and why.
    ``note`` marks what loses nothing (an empty segment followed by others)."""

    path: str
    offset: int
    status: str
    message: str
    note: bool = False

    def __str__(self) -> str:
        if self.note:
            return f"note: {self.path}: {self.message}"
        return f"{self.path}: offset {self.offset}: {self.message}"


# ------------------------------------------------------------------ arguments
def _u32(a: npt.ArrayLike, what: str) -> npt.NDArray[np.uint32]:
    """`a` as a contiguous 1-D uint32 array, refusing values that do not fit
    (a silent wrap-around would log the wrong index)."""
    if type(a) is np.ndarray and a.dtype == _U32 and a.ndim == 1 and a.flags.c_contiguous:
        return a
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise errors.InvalidArgumentError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != _U32:
        if arr.size == 0:
            return np.zeros(0, _U32)
        if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
            raise errors.InvalidArgumentError(f"{what} must be integers, not {arr.dtype}")
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi > 0xFFFFFFFF:
            raise errors.OutOfRangeError(
                f"{what} must fit in uint32 (0 .. 4294967295); found {lo if lo < 0 else hi}")
        arr = arr.astype(_U32)
    return np.ascontiguousarray(arr)


def _f64(a: npt.ArrayLike, what: str) -> npt.NDArray[np.float64]:
    if type(a) is np.ndarray and a.dtype == _F64 and a.ndim == 1 and a.flags.c_contiguous:
        return a
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise errors.InvalidArgumentError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != _F64:
        if arr.size and not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise errors.InvalidArgumentError(f"{what} must be numbers, not {arr.dtype}")
        if np.issubdtype(arr.dtype, np.complexfloating):
            raise errors.InvalidArgumentError(f"{what} must be real numbers, not {arr.dtype}")
        arr = arr.astype(_F64)
    return np.ascontiguousarray(arr)


_FROM_BUFFER = ffi.from_buffer
_NULL = ffi.NULL
_NDARRAY = np.ndarray


# ------------------------------------------------------------------ writer
class DataLogger:
    """Records sparse vectors into ``<segments_dir>/segments/*.seg.zst``.

    Constructor arguments as in the original logger design: ``ring_bytes`` bounds the memory of
    frames waiting for the writer, ``rotate_bytes`` the size of a segment,
    ``zstd_level`` the compression. Beyond that design: ``frame_bytes``
    (uncompressed bytes per zstd frame), ``flush_interval_ms`` (a partly
    filled frame reaches the file after at most this long), ``when_full``
    (``"block"``: record() waits for the writer; ``"raise"``: it raises
    :class:`a2pack.FullError` and keeps nothing of that record) and
    ``writer_threads`` (compressing threads, 0 = auto) and
    ``compress_literals`` (Huffman-code zstd's literals: ~14 % smaller
    files on typical data, about half the decode speed; off by default).

    Reopening a folder keeps its streams and appends new segments. Only one
    logger may hold a folder at a time. ``close()`` (also on ``with`` exit,
    garbage collection and interpreter exit) flushes everything durably.
    """

    def __init__(self, segments_dir: PathLike, ring_bytes: int = 1 << 27,
                 rotate_bytes: int = 256 << 20, zstd_level: int = 1, *,
                 frame_bytes: int = 256 << 10, flush_interval_ms: int = 100,
                 when_full: str = "block", writer_threads: int = 0,
                 compress_literals: bool = False) -> None:
        if when_full not in ("block", "raise"):
            raise errors.InvalidArgumentError(f"when_full must be 'block' or 'raise', not {when_full!r}")
        opts = ffi.new("a2pack_logger_options *")
        lib.a2pack_logger_options_init(opts)
        opts.ring_bytes = int(ring_bytes)
        opts.rotate_bytes = int(rotate_bytes)
        opts.zstd_level = int(zstd_level)
        opts.frame_bytes = int(frame_bytes)
        opts.flush_interval_ms = int(flush_interval_ms)
        opts.when_full = lib.A2PACK_LOGGER_RETURN_FULL if when_full == "raise" else lib.A2PACK_LOGGER_BLOCK
        opts.writer_threads = int(writer_threads)
        opts.compress_literals = 1 if compress_literals else 0
        out = ffi.new("a2pack_logger **")
        self.dir = os.fspath(segments_dir)
        check(lib.a2pack_logger_open(fspath(segments_dir), opts, out))
        # The handle is freed only by garbage collection: a close() racing a
        # record() on another thread then meets A2PACK_E_CLOSED, never freed
        # memory. finish() runs once: from close(), at collection, or at exit.
        self._h: Any = ffi.gc(out[0], lib.a2pack_logger_close)
        self._finish = weakref.finalize(self, lib.a2pack_logger_finish, self._h)
        self._record: Any = lib.a2pack_logger_record

    # -------------------------------------------------------------- streams
    def register_stream(self, labels: Optional[Mapping[str, Any]] = None,
                        epoch_scale: Optional[float] = None, value_scale: Optional[float] = None,
                        *, sort: bool = False) -> int:
        """Register a stream; writes ``streams/<id>.json`` (labels and scales)
        durably and returns the stream id. Epochs are stored as ticks of
        ``epoch_scale`` and values as multiples of ``value_scale`` (both > 0,
        both required; positional as in ``register_stream(labels, epoch_scale,
        value_scale)`` or by keyword): decoded values are within
        ``value_scale/2`` of what was recorded. With ``sort=True`` records
        whose indices are out of order are sorted (duplicates are still
        refused)."""
        if epoch_scale is None or value_scale is None:
            missing = [n for n, v in (("epoch_scale", epoch_scale), ("value_scale", value_scale))
                       if v is None]
            raise TypeError(f"register_stream() missing required argument(s): {', '.join(missing)}")
        try:
            text = json.dumps(dict(labels or {}), allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgumentError(f"labels must be JSON-serialisable: {e}") from None
        sid = ffi.new("uint32_t *")
        check(lib.a2pack_logger_register_stream(self._h, text.encode("utf-8"), float(epoch_scale),
                                                float(value_scale), SORT if sort else 0, sid))
        return int(sid[0])

    # -------------------------------------------------------------- records
    def record(self, stream_id: int, epoch: float, indices: npt.ArrayLike,
               values: npt.ArrayLike) -> None:
        """Record one sparse vector: ``indices`` (uint32, strictly increasing
        unless the stream sorts) and ``values`` (float64, finite) of equal
        length. Any problem raises and nothing of the record is kept."""
        # Fast path: contiguous uint32 / float64 vectors go straight to the
        # library (from_buffer refuses non-contiguous memory).
        if (type(indices) is _NDARRAY and indices.dtype is _U32 and indices.ndim == 1
                and type(values) is _NDARRAY and values.dtype is _F64 and values.ndim == 1):
            n = indices.shape[0]
            if values.shape[0] == n and n:
                try:
                    st = self._record(self._h, stream_id, epoch, _FROM_BUFFER("uint32_t[]", indices),
                                      _FROM_BUFFER("double[]", values), n)
                except (BufferError, TypeError, ValueError):
                    pass
                else:
                    if st:
                        check(st)
                    return
        idx = _u32(indices, "indices")
        val = _f64(values, "values")
        n = idx.shape[0]
        if val.shape[0] != n:
            raise errors.InvalidArgumentError(
                f"stream {stream_id}: indices has {n} entries, values {val.shape[0]}")
        if n:
            st = self._record(self._h, stream_id, epoch, _FROM_BUFFER("uint32_t[]", idx),
                              _FROM_BUFFER("double[]", val), n)
        else:
            st = self._record(self._h, stream_id, epoch, _NULL, _NULL, 0)
        if st:
            check(st)

    def record_batch(self, stream_ids: Union[int, npt.ArrayLike], epochs: npt.ArrayLike,
                     offsets: npt.ArrayLike, indices: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Record many vectors in one call: record ``i`` is ``(stream_ids[i],
        epochs[i], indices[offsets[i]:offsets[i+1]], values[...])``.
        ``stream_ids`` may be one int for all. ``offsets`` has one entry more
        than ``epochs``. Records are taken in order; on an error the exception
        names the failing record and carries ``.records_done`` (how many were
        kept before it)."""
        ep = _f64(epochs, "epochs")
        n = ep.shape[0]
        if np.isscalar(stream_ids):
            # One id for all; a non-number scalar fails in int() as it should.
            sids = np.full(n, int(stream_ids), _U32)  # type: ignore[arg-type]
        else:
            sids = _u32(stream_ids, "stream_ids")
        off = np.asarray(offsets)
        if off.dtype != _U64:
            if off.size and (not np.issubdtype(off.dtype, np.integer) or int(off.min()) < 0):
                raise errors.InvalidArgumentError("offsets must be non-negative integers")
            off = off.astype(_U64)
        off = np.ascontiguousarray(off.reshape(-1))
        idx = _u32(indices, "indices")
        val = _f64(values, "values")
        if sids.shape[0] != n or off.shape[0] != n + 1:
            raise errors.InvalidArgumentError(
                f"{n} epochs need {n} stream ids and {n + 1} offsets, got {sids.shape[0]} and "
                f"{off.shape[0]}")
        if idx.shape[0] != val.shape[0]:
            raise errors.InvalidArgumentError(
                f"indices has {idx.shape[0]} entries, values {val.shape[0]}")
        if n == 0:
            return
        if int(off[0]) != 0 or int(off[-1]) != idx.shape[0] or (np.diff(off.astype(np.int64)) < 0).any():
            raise errors.InvalidArgumentError(
                f"offsets must rise from 0 to len(indices) = {idx.shape[0]}")
        done = ffi.new("size_t *")
        st = lib.a2pack_logger_record_batch(
            self._h, n, _FROM_BUFFER("uint32_t[]", sids), _FROM_BUFFER("double[]", ep),
            _FROM_BUFFER("uint64_t[]", off),
            _FROM_BUFFER("uint32_t[]", idx) if idx.size else _NULL,
            _FROM_BUFFER("double[]", val) if val.size else _NULL, done)
        if st:
            try:
                check(st)
            except errors.Error as e:
                # Only this method's errors carry it, so Error does not declare it.
                setattr(e, "records_done", int(done[0]))
                raise

    # -------------------------------------------------------------- lifecycle
    def flush(self) -> None:
        """Everything recorded so far (by any thread) is durable on return."""
        check(lib.a2pack_logger_flush(self._h))

    def close(self) -> None:
        """Flush, stop the writer threads and release the folder. Idempotent;
        later record()/flush() raise :class:`a2pack.ClosedError`."""
        st = self._finish()
        if st:
            check(st)

    @property
    def closed(self) -> bool:
        return not self._finish.alive

    def __enter__(self) -> "DataLogger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> Dict[str, int]:
        """Counters: records, values, raw_bytes, frames, file_bytes, segments,
        full_events, queued_bytes, max_queued_bytes, flushes."""
        s = ffi.new("a2pack_logger_stats *")
        s.size = ffi.sizeof("a2pack_logger_stats")
        check(lib.a2pack_logger_stats_get(self._h, s))
        return {k: int(getattr(s, k)) for k in (
            "records", "values", "raw_bytes", "frames", "file_bytes", "segments", "full_events",
            "queued_bytes", "max_queued_bytes", "flushes")}

    # -------------------------------------------------------------- reading
    def decode(self, *, workers: int = 0, strict: bool = False, **limits: int) -> "LogData":
        """Flush (when open), then decode the whole folder into columns."""
        if not self.closed:
            self.flush()
        return decode(self.dir, workers=workers, strict=strict, **limits)

    def decode_all_segments(self) -> Iterator[Record]:
        """The original design's decoder: ``(stream_id, epoch, indices, values)`` for
        every record, in file order (arrays are read-only views)."""
        return iter(self.decode())

    def to_parquet(self, out_path: PathLike, **kwargs: Any) -> None:
        """Write the logger's Parquet schema (stream_id uint32, epoch float64,
        indices list<uint32>, values list<float64>); needs pyarrow."""
        self.decode().to_parquet(out_path, **kwargs)

    def __repr__(self) -> str:
        return f"DataLogger({self.dir!r}{', closed' if self.closed else ''})"


# ------------------------------------------------------------------ reading
class LogData:
    """A decoded logger folder as columns (numpy arrays viewing library
    memory, read-only): ``stream_ids`` (uint32), ``epochs`` (float64),
    ``offsets`` (uint64, one more than records), ``indices`` (uint32) and
    ``values`` (float64); record ``r`` owns ``offsets[r]:offsets[r+1]``.
    ``streams`` maps ids to :class:`LogStream`; ``problems`` lists what was
    skipped (damaged frames, missing sidecars)."""

    def __init__(self, handle: Any) -> None:
        self._h = handle
        c = ffi.new("a2pack_logger_columns *")
        c.size = ffi.sizeof("a2pack_logger_columns")
        check(lib.a2pack_logger_data_columns(handle, c))
        s = ffi.new("a2pack_logger_summary *")
        s.size = ffi.sizeof("a2pack_logger_summary")
        check(lib.a2pack_logger_data_summary(handle, s))
        nr, nv = int(c.n_records), int(c.n_values)
        self.stream_ids: npt.NDArray[np.uint32] = view_array(self, c.stream_ids, nr, np.uint32)
        self.epochs: npt.NDArray[np.float64] = view_array(self, c.epochs, nr, np.float64)
        self.offsets: npt.NDArray[np.uint64] = view_array(self, c.offsets, nr + 1, np.uint64)
        self.indices: npt.NDArray[np.uint32] = view_array(self, c.indices, nv, np.uint32)
        self.values: npt.NDArray[np.float64] = view_array(self, c.values, nv, np.float64)
        self.summary = {k: int(getattr(s, k)) for k in (
            "segments", "frames", "bad_frames", "file_bytes", "raw_bytes", "records", "values",
            "streams", "problems", "notes")}
        streams: Dict[int, LogStream] = {}
        info = ffi.new("a2pack_logger_stream_info *")
        for i in range(int(s.streams)):
            info.size = ffi.sizeof("a2pack_logger_stream_info")
            check(lib.a2pack_logger_data_stream(handle, i, info))
            streams[int(info.stream_id)] = LogStream(
                int(info.stream_id), json.loads(ffi.string(info.labels_json).decode("utf-8")),
                float(info.epoch_scale), float(info.value_scale), bool(info.flags & SORT))
        self.streams: Dict[int, LogStream] = streams
        problems: List[LogProblem] = []
        p = ffi.new("a2pack_logger_problem *")
        for i in range(int(s.problems)):
            p.size = ffi.sizeof("a2pack_logger_problem")
            check(lib.a2pack_logger_data_problem(handle, i, p))
            problems.append(LogProblem(
                os.fsdecode(ffi.string(p.path)), int(p.offset),
                ffi.string(lib.a2pack_status_name(p.status)).decode(),
                ffi.string(p.message).decode("utf-8", "replace"), bool(p.note)))
        self.problems: List[LogProblem] = problems

    def __len__(self) -> int:
        return int(self.stream_ids.shape[0])

    def __getitem__(self, r: int) -> Record:
        n = len(self)
        if r < 0:
            r += n
        if not 0 <= r < n:
            raise IndexError(f"record {r} out of range: {n} records")
        a, b = int(self.offsets[r]), int(self.offsets[r + 1])
        return int(self.stream_ids[r]), float(self.epochs[r]), self.indices[a:b], self.values[a:b]

    def __iter__(self) -> Iterator[Record]:
        ids, eps, off = self.stream_ids.tolist(), self.epochs.tolist(), self.offsets.tolist()
        idx, val = self.indices, self.values
        for r in range(len(ids)):
            a, b = off[r], off[r + 1]
            yield ids[r], eps[r], idx[a:b], val[a:b]

    def to_arrow(self, *, label_columns: bool = False) -> Any:  # a pyarrow.Table
        """A pyarrow Table with the logger's schema (stream_id uint32, epoch
        float64, indices list<uint32>, values list<float64>; large_list past
        2^31 - 1 non-zeros) and the streams' sidecars as schema metadata.

        ``label_columns=True`` adds one dictionary-encoded string column
        ``label_<key>`` per label key of any stream (null where a record's
        stream has no such label; a label value that is not a string is
        written as its JSON text), so DuckDB, pandas or Polars can filter by
        label: ``WHERE label_entity = 'cell-0'``."""
        pa = _pyarrow()
        nv = self.indices.shape[0]
        if nv < 2**31:
            off = pa.array(self.offsets.astype(np.int32), pa.int32())
            mk = pa.ListArray.from_arrays
        else:
            off = pa.array(self.offsets.astype(np.int64), pa.int64())
            mk = pa.LargeListArray.from_arrays
        table = pa.table({
            "stream_id": pa.array(self.stream_ids, pa.uint32()),
            "epoch": pa.array(self.epochs, pa.float64()),
            "indices": mk(off, pa.array(self.indices, pa.uint32())),
            "values": mk(off, pa.array(self.values, pa.float64())),
        })
        if label_columns:
            for name, column in self._label_columns(pa).items():
                table = table.append_column(name, column)
        streams = {str(k): {"labels": s.labels, "epoch_scale": s.epoch_scale,
                            "value_scale": s.value_scale, "sort": s.sort}
                   for k, s in self.streams.items()}
        return table.replace_schema_metadata({"a2pack.logger.streams": json.dumps(streams)})

    def _label_columns(self, pa: Any) -> Dict[str, Any]:
        """``label_<key>`` dictionary arrays: per key, a code per stream id
        (-1 where the stream lacks the key), then one vectorised take by each
        record's stream id."""
        keys = sorted({k for s in self.streams.values() for k in s.labels})
        ids = self.stream_ids.astype(np.int64, copy=False)
        top = int(max(self.streams, default=-1))
        if ids.size:
            top = max(top, int(ids.max()))
        out: Dict[str, Any] = {}
        for key in keys:
            words: Dict[str, int] = {}
            code_of = np.full(top + 2, -1, np.int32)  # the last slot: unknown stream ids
            for sid, st in self.streams.items():
                if key in st.labels:
                    v = st.labels[key]
                    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                    code_of[sid] = words.setdefault(text, len(words))
            codes = code_of[ids] if ids.size else np.empty(0, np.int32)
            indices = pa.array(codes, pa.int32(), mask=codes < 0)
            out[f"label_{key}"] = pa.DictionaryArray.from_arrays(
                indices, pa.array(list(words), pa.string()))
        return out

    def to_parquet(self, out_path: PathLike, *, compression: str = "zstd",
                   row_group_size: Optional[int] = None, label_columns: bool = False) -> None:
        """Write :meth:`to_arrow` as Parquet (needs pyarrow); ``label_columns``
        as there."""
        _pyarrow()
        import pyarrow.parquet as pq

        pq.write_table(self.to_arrow(label_columns=label_columns), os.fspath(out_path),
                       compression=compression, row_group_size=row_group_size)

    def __repr__(self) -> str:
        return (f"LogData({len(self)} records, {self.indices.shape[0]} non-zeros, "
                f"{len(self.streams)} streams, {len(self.problems)} problems)")


def _pyarrow() -> Any:
    """pyarrow, imported only when Parquet/Arrow output is asked for."""
    try:
        import pyarrow
    except ImportError as e:
        raise ImportError(
            "a2pack.logger: Parquet export needs the 'pyarrow' package, which is not "
            "installed (pip install pyarrow)") from e
    return pyarrow


def decode(segments_dir: PathLike, *, workers: int = 0, strict: bool = False,
           max_frame_records: int = 0, max_frame_bytes: int = 0, max_records: int = 0,
           max_bytes: int = 0, max_expansion: int = 0) -> LogData:
    """Decode a logger folder (in parallel across segments and frames).
    Damaged frames, missing segments and sidecars whose checksum fails are
    skipped, listed in ``.problems`` and reported with a
    :class:`DecodeWarning`; ``strict=True`` raises on the first instead (notes
    included). The ``max_*`` limits (0 = the library's default) bound what a
    frame and the whole decode may expand to (docs/logger.md, "Limits");
    ``max_expansion`` how many times its size on disk a frame may expand to."""
    o = ffi.new("a2pack_logger_decode_options *")
    lib.a2pack_logger_decode_options_init(o)
    o.workers = int(workers)
    o.strict = 1 if strict else 0
    o.max_frame_records = int(max_frame_records)
    o.max_frame_bytes = int(max_frame_bytes)
    o.max_records = int(max_records)
    o.max_bytes = int(max_bytes)
    o.max_expansion = int(max_expansion)
    out = ffi.new("a2pack_logger_data **")
    check(lib.a2pack_logger_decode(fspath(segments_dir), o, out))
    data = LogData(ffi.gc(out[0], lib.a2pack_logger_data_close))
    for p in data.problems:
        warnings.warn(str(p), DecodeWarning, stacklevel=2)
    return data


def to_parquet(segments_dir: PathLike, out_path: PathLike, *, strict: bool = False,
               **kwargs: Any) -> LogData:
    """Decode a folder and write it as Parquet; returns the decoded data."""
    data = decode(segments_dir, strict=strict)
    data.to_parquet(out_path, **kwargs)
    return data


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m a2pack.logger to-parquet DIR OUT [--strict]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m a2pack.logger")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("to-parquet", help="write a logger folder as Parquet")
    p.add_argument("dir")
    p.add_argument("out")
    p.add_argument("--strict", action="store_true")
    p.add_argument("--label-columns", action="store_true",
                   help="add a dictionary-encoded label_<key> column per stream label key")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (docs/cli.md)")
    args = ap.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DecodeWarning)
            data = decode(args.dir, strict=args.strict)
        from ._cli import status

        for prob in data.problems:
            status(f"a2pack: {'' if prob.note else 'warning: '}{prob}")
        data.to_parquet(args.out, label_columns=args.label_columns)
    except (errors.Error, ImportError) as e:
        print(f"a2pack: error: {e}", file=sys.stderr)
        return 1
    size = os.path.getsize(args.out)
    if args.json:
        print(json.dumps({"dir": args.dir, "output": args.out, "records": len(data),
                          "nonzeros": int(data.indices.shape[0]),
                          "streams": len(data.streams), "problems": len(data.problems),
                          "bytes": size}, indent=2))
        return 0
    from ._cli import status

    status(f"wrote {len(data)} records ({data.indices.shape[0]} non-zeros, "
           f"{len(data.streams)} streams) to {args.out} ({size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
