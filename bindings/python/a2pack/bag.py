"""Bagz / Säckli record files: the `sackli` (and `bagz`) Python API on liba2pack.

Code written for sackli or bagz runs after changing the import::

    from a2pack import bag as sackli

    with sackli.Writer("/tmp/data.bagz") as w:
        w.write(b"record")
    r = sackli.Reader("/tmp/data.bagz")
    r[0], r[-1], r[::2], r.read_indices([3, 1]), list(r.read_indices_iter(gen))

Files move freely between a2pack, bagz and sackli (docs/bag.md). All the
reading, decompression and index building happens in the C++ library; this
module crosses the C boundary once per batch and turns batches into `bytes`.

Differences from bagz, all deliberate:
  * a Writer's file appears only when it is closed (temporary name, then
    rename); leaving a ``with`` block by an exception abandons the file;
  * negative indices work everywhere (``r[-1]``, ``read_indices([-1])``);
  * ``Reader.Options.max_parallelism`` (100, as bagz) caps the threads that
    wait on the disk; copying and decompressing use at most one per core;
  * a file truncated (or rewritten in place) by another process while a
    Reader has it mapped makes the next read raise CorruptError naming the
    file, where bagz ends the process with SIGBUS (records already returned
    are whole copies; docs/bag.md, "Files cut short").
"""

from __future__ import annotations

import array
import collections
import concurrent.futures
import ctypes
import enum
import itertools
import operator
import os
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, List, Optional, Union

import numpy as np

from . import errors
from ._native import check, ffi, fspath, lib

__all__ = [
    "AccessPattern",
    "CachePolicy",
    "CompressionAutoDetect",
    "CompressionNone",
    "CompressionZstd",
    "Index",
    "LimitsPlacement",
    "LimitsStorage",
    "MultiIndex",
    "Reader",
    "ReaderIterator",
    "ShardingLayout",
    "UnreferencedBytesWarning",
    "Writer",
]


# ---------------------------------------------------------------- options

class LimitsPlacement(enum.Enum):
    TAIL = 0
    SEPARATE = 1


class LimitsStorage(enum.Enum):
    ON_DISK = 0
    IN_MEMORY = 1


class ShardingLayout(enum.Enum):
    CONCATENATED = 0
    INTERLEAVED = 1


class AccessPattern(enum.Enum):
    SYSTEM = 0
    RANDOM = 1
    SEQUENTIAL = 2


class CachePolicy(enum.Enum):
    SYSTEM = 0
    DROP_AFTER_READ = 1
    DIRECT_IO = 2


class _ArglessCompression:
    """A compression choice without parameters: all instances are equal."""

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        return f"{type(self).__name__}()"


class CompressionAutoDetect(_ArglessCompression):
    """Compression by extension: `.bagz` → Zstandard, anything else → none."""


class CompressionNone(_ArglessCompression):
    """Records are stored as they are."""


class CompressionZstd:
    """One Zstandard frame per record.

    Args:
      level: compression level (0 = zstd's default, 3); unused when reading.
      dictionary: a zstd dictionary (trained, or raw content), or empty for
        none. Readers must be given the same dictionary.
    """

    def __init__(self, level: int = 0, dictionary: Union[str, bytes] = ""):
        self.level = int(level)
        self.dictionary = dictionary

    def _dictionary_bytes(self) -> bytes:
        d = self.dictionary
        return d.encode("utf-8") if isinstance(d, str) else bytes(d)

    def __eq__(self, other):
        return (type(other) is CompressionZstd and self.level == other.level
                and self._dictionary_bytes() == other._dictionary_bytes())

    def __hash__(self):
        return hash((CompressionZstd, self.level, self._dictionary_bytes()))

    def __repr__(self):
        return f"CompressionZstd(level={self.level}, dictionary=<{len(self._dictionary_bytes())} bytes>)"


_Compression = Union[CompressionAutoDetect, CompressionNone, CompressionZstd]


def _compression_fields(c) -> tuple:
    """(C enum, level, dictionary bytes) of a compression option."""
    if c is None or isinstance(c, CompressionAutoDetect):
        return lib.A2PACK_BAG_COMPRESSION_AUTO, 0, b""
    if isinstance(c, CompressionNone):
        return lib.A2PACK_BAG_COMPRESSION_NONE, 0, b""
    if isinstance(c, CompressionZstd):
        return lib.A2PACK_BAG_COMPRESSION_ZSTD, c.level, c._dictionary_bytes()
    raise TypeError(f"compression must be CompressionAutoDetect, CompressionNone or "
                    f"CompressionZstd, not {type(c).__name__}")


def _enum(value, cls):
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        raise TypeError(f"expected a {cls.__name__}, got {value!r}") from None


def _default_max_record_bytes() -> int:
    """The library's default (A2PACK_BAG_DEFAULT_MAX_RECORD_BYTES, 1 GiB)."""
    o = ffi.new("a2pack_bag_reader_options *")
    lib.a2pack_bag_reader_options_init(o)
    return int(o.max_record_bytes)


class _ReaderOptions:
    """Options for creating a Reader (see the module docstring of sackli)."""

    def __init__(
        self,
        sharding_layout: ShardingLayout = ShardingLayout.CONCATENATED,
        limits_placement: LimitsPlacement = LimitsPlacement.TAIL,
        compression: _Compression = None,
        limits_storage: LimitsStorage = LimitsStorage.ON_DISK,
        max_parallelism: Optional[int] = None,
        access_pattern: AccessPattern = AccessPattern.SYSTEM,
        cache_policy: CachePolicy = CachePolicy.SYSTEM,
        max_record_bytes: Optional[int] = None,
        strict: bool = False,
    ):
        self.sharding_layout = _enum(sharding_layout, ShardingLayout)
        self.limits_placement = _enum(limits_placement, LimitsPlacement)
        self.compression = CompressionAutoDetect() if compression is None else compression
        _compression_fields(self.compression)
        self.limits_storage = _enum(limits_storage, LimitsStorage)
        self.max_parallelism = 100 if max_parallelism is None else int(max_parallelism)
        if self.max_parallelism < 1:
            raise ValueError("max_parallelism must be at least 1")
        self.access_pattern = _enum(access_pattern, AccessPattern)
        self.cache_policy = _enum(cache_policy, CachePolicy)
        # a2pack extensions: the largest decoded size of a compressed record
        # (default 1 GiB, checked before anything is allocated), and whether
        # unreferenced bytes after the last limit of a separate-limits file
        # are an error (strict) or a warning.
        self.max_record_bytes = (_default_max_record_bytes()
                                 if max_record_bytes is None else int(max_record_bytes))
        if self.max_record_bytes < 1:
            raise ValueError("max_record_bytes must be at least 1")
        self.strict = bool(strict)

    def _c_struct(self):
        o = ffi.new("a2pack_bag_reader_options *")
        lib.a2pack_bag_reader_options_init(o)
        comp, _, dictionary = _compression_fields(self.compression)
        o.compression = comp
        keep = None
        if dictionary:
            keep = ffi.from_buffer("uint8_t[]", dictionary)
            o.zstd_dictionary = keep
            o.zstd_dictionary_len = len(dictionary)
        o.limits_placement = _enum(self.limits_placement, LimitsPlacement).value
        o.limits_storage = _enum(self.limits_storage, LimitsStorage).value
        o.access_pattern = _enum(self.access_pattern, AccessPattern).value
        o.cache_policy = _enum(self.cache_policy, CachePolicy).value
        o.sharding = _enum(self.sharding_layout, ShardingLayout).value
        o.max_parallelism = int(self.max_parallelism)
        # getattr: options pickled by an older a2pack lack these.
        o.max_record_bytes = int(getattr(self, "max_record_bytes", 0) or 0)
        o.strict = 1 if getattr(self, "strict", False) else 0
        return o, keep

    def __eq__(self, other):
        return type(other) is type(self) and vars(self) == vars(other)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"Reader.Options({fields})"


class _WriterOptions:
    """Options for creating a Writer.

    Args:
      limits_placement: where the limits go at close (default TAIL).
      compression: default auto-detection by extension.
      durable: fsync the file before it is renamed into place at close (the
        default). False skips the fsync, as bagz's writer (which never
        fsyncs) does: the file still appears only once complete, but a power
        loss soon after close may lose its contents. (a2pack extension.)
      direct_io: write whole 1 MiB blocks of the file with O_DIRECT, around
        the page cache (the default, where the filesystem allows it): large
        files write faster, and the page cache stays with readers. With
        durable=False blocks go through the page cache and with O_DIRECT at
        the same time, the page cache taking them until the kernel would
        start throttling writers. False writes every byte through the page
        cache. (a2pack extension.)
    """

    def __init__(
        self,
        limits_placement: LimitsPlacement = LimitsPlacement.TAIL,
        compression: _Compression = None,
        durable: bool = True,
        direct_io: bool = True,
    ):
        self.limits_placement = _enum(limits_placement, LimitsPlacement)
        self.compression = CompressionAutoDetect() if compression is None else compression
        _compression_fields(self.compression)
        self.durable = bool(durable)
        self.direct_io = bool(direct_io)

    def __eq__(self, other):
        return type(other) is type(self) and vars(self) == vars(other)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"Writer.Options({fields})"


# ---------------------------------------------------------------- batches

def _records_of(batch_ptr) -> List[bytes]:
    """The records of a C batch as bytes objects; closes the batch."""
    try:
        data = ffi.new("const uint8_t **")
        offs = ffi.new("const uint64_t **")
        count = ffi.new("size_t *")
        lib.a2pack_bag_batch_view(batch_ptr, data, offs, count)
        n = count[0]
        if n == 0:
            return []
        o = np.frombuffer(ffi.buffer(offs[0], 8 * (n + 1)), dtype=np.uint64).tolist()
        # One slice (one copy into a new bytes object) per record, straight
        # from the batch's memory: far cheaper than a C call per record.
        buf = ffi.buffer(data[0], o[-1])
        return list(map(buf.__getitem__, map(slice, o[:-1], itertools.islice(o, 1, None))))
    finally:
        lib.a2pack_bag_batch_close(batch_ptr)


def _records_lazily(batch_ptr) -> Iterator[bytes]:
    """The records of a C batch, each copied out of the batch's memory into
    its own bytes object only when the iterator reaches it (a C-level slice
    per record, no Python frame); the batch is released with the iterator."""
    data = ffi.new("const uint8_t **")
    offs = ffi.new("const uint64_t **")
    count = ffi.new("size_t *")
    lib.a2pack_bag_batch_view(batch_ptr, data, offs, count)
    n = count[0]
    o = np.frombuffer(ffi.buffer(offs[0], 8 * (n + 1)), dtype=np.uint64).tolist() if n else [0]
    if o[-1] == 0:
        lib.a2pack_bag_batch_close(batch_ptr)
        return iter([b""] * n)
    # The buffer keeps `owner` alive, and `owner` releases the batch.
    owner = ffi.gc(data[0], lambda _p, b=batch_ptr: lib.a2pack_bag_batch_close(b))
    buf = ffi.buffer(owner, o[-1])
    return map(buf.__getitem__, map(slice, o[:-1], itertools.islice(o, 1, None)))


# Records at least this large (stored bytes per record, on average) are
# decoded by the library straight into their bytes objects: one copy instead
# of two, and the first touch of each object's fresh memory happens on all of
# the reader's workers instead of in this thread. Smaller records are cheaper
# as slices of one batch buffer (a C-level slice beats a ctypes call each).
_DIRECT_FILL_BYTES = 8 << 10
# For stored records of a mapping, read into a batch buffer and sliced from
# there, the library's fill pays off only for batches big enough to split
# over the workers (iteration reads small chunks, whose freed memory the next
# reuses).
_DIRECT_FILL_MAPPED_BATCH = 4 << 20

# PyBytes_FromStringAndSize(NULL, n): a bytes object whose n bytes are
# uninitialised, for its creator to fill before anyone else sees it - the
# CPython C API's own way of building bytes in place (bytes(n) would zero it
# first). Only fresh objects from here are ever written, never one a caller
# has seen; the empty singleton (n = 0) is never written.
_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.restype = ctypes.py_object
_new_bytes.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)


def _records_filled(handle_ptr, idx: np.ndarray, workers: int, spec="") -> List[bytes]:
    """Records idx of a reader, each decoded by the library into its own new
    bytes object (a2pack_bag_reader_prepare + a2pack_bag_pending_fill)."""
    n = len(idx)
    out = ffi.new("a2pack_bag_pending **")
    sizes_p = ffi.new("const uint64_t **")
    check(lib.a2pack_bag_reader_prepare(
        handle_ptr, ffi.from_buffer("uint64_t[]", idx), n, workers, out, sizes_p))
    pending = out[0]
    try:
        sizes = np.frombuffer(ffi.buffer(sizes_p[0], 8 * n), dtype=np.uint64).tolist()
        try:
            records = list(map(_new_bytes, itertools.repeat(None, n), sizes))
        except MemoryError:
            raise errors.NoMemoryError(
                f"{spec}: out of memory allocating {sum(sizes)} bytes for a batch of {n} records",
                lib.A2PACK_E_NO_MEMORY) from None
        dests = ffi.new("uint8_t *[]", [ffi.from_buffer("uint8_t[]", r) for r in records])
        check(lib.a2pack_bag_pending_fill(pending, dests))
        return records
    finally:
        lib.a2pack_bag_pending_close(pending)


class UnreferencedBytesWarning(UserWarning):
    """A records file holds bytes no limit covers (separate placement: the
    limits file may have been cut short). The reader reads the records the
    limits describe, as bagz does; Reader.Options(strict=True) refuses the
    file instead."""


class _Handle:
    """Owns one C reader; shared by a Reader and all its slices."""

    __slots__ = ("ptr", "spec", "count", "stored_bytes", "mapped", "fill_direct", "fill_min",
                 "__weakref__")

    def __init__(self, spec, options: _ReaderOptions):
        o, _keep = options._c_struct()
        self.spec = ",".join(map(str, spec)) if isinstance(spec, (list, tuple)) else str(spec)
        out = ffi.new("a2pack_bag_reader **")
        if isinstance(spec, (list, tuple)):
            encoded = [ffi.new("char[]", fspath(p)) for p in spec]
            arr = ffi.new("const char *[]", encoded)
            check(lib.a2pack_bag_reader_open_paths(arr, len(encoded), o, out))
        else:
            check(lib.a2pack_bag_reader_open(fspath(spec), o, out))
        self.ptr = out[0]
        notes = ffi.string(lib.a2pack_bag_reader_notes(self.ptr)).decode("utf-8", "replace")
        for line in notes.splitlines():
            warnings.warn(line, UnreferencedBytesWarning, stacklevel=4)
        self.count = int(lib.a2pack_bag_reader_count(self.ptr))
        self.stored_bytes = int(lib.a2pack_bag_reader_stored_bytes(self.ptr))
        # Every shard mapped and stored as it is: records are copied out of
        # the mappings by the library (under its guard against a file cut
        # short, docs/bag.md), with nothing to decode or to wait for.
        self.mapped = self._all_mapped()
        self.fill_direct = self.count > 0 and self.stored_bytes >= _DIRECT_FILL_BYTES * self.count
        # Fewest records a call must read to take the fill path.
        self.fill_min = 2 if not self.mapped else max(
            2, _DIRECT_FILL_MAPPED_BATCH * self.count // max(1, self.stored_bytes))

    def _all_mapped(self) -> bool:
        base = ffi.new("const uint8_t **")
        size = ffi.new("uint64_t *")
        for i in range(int(lib.a2pack_bag_reader_shard_count(self.ptr))):
            if lib.a2pack_bag_reader_shard_map(self.ptr, i, base, size) != 0:
                lib.a2pack_clear_error()
                return False
        return True

    def __del__(self):
        ptr = getattr(self, "ptr", None)
        if ptr is not None:
            lib.a2pack_bag_reader_close(ptr)
            self.ptr = None

    def iter_range(self, start: int, n: int) -> Iterator[bytes]:
        """Records start..start+n of a mapped handle: copied out of the
        mapping into one (reused) batch buffer by the library, then each into
        its own bytes object as it is taken, so a consumer that drops each
        record before the next gets every copy into the same warm block of
        memory. The iterator holds the batch, not the handle."""
        out = ffi.new("a2pack_bag_batch **")
        check(lib.a2pack_bag_reader_read_range(self.ptr, start, n, 1, out))
        return _records_lazily(out[0])

    def iter_global(self, indices: np.ndarray) -> Iterator[bytes]:
        """iter_range for any positions."""
        idx = np.ascontiguousarray(indices, dtype=np.uint64)
        out = ffi.new("a2pack_bag_batch **")
        check(lib.a2pack_bag_reader_read(self.ptr, ffi.from_buffer("uint64_t[]", idx), len(idx), 1,
                                         out))
        return _records_lazily(out[0])

    def read_range(self, start: int, n: int, workers: int) -> List[bytes]:
        if self.fill_direct and n >= self.fill_min:
            return _records_filled(self.ptr, np.arange(start, start + n, dtype=np.uint64), workers,
                                   self.spec)
        if self.mapped:
            return list(self.iter_range(start, n))
        out = ffi.new("a2pack_bag_batch **")
        check(lib.a2pack_bag_reader_read_range(self.ptr, start, n, workers, out))
        return _records_of(out[0])

    def read_picks(self, indices: np.ndarray, workers: int) -> List[bytes]:
        """read_global for indices a caller chose (read_indices and
        read_indices_iter), where repeats may occur."""
        idx = np.ascontiguousarray(indices, dtype=np.uint64)
        if len(idx) > 1:
            # A repeated index gives the same object each time, as bagz
            # does (`a is b`): read each distinct record once, then fan out.
            uniq, first, inverse = np.unique(idx, return_index=True, return_inverse=True)
            if len(uniq) < len(idx):
                # Read in order of first appearance (keeps runs of
                # neighbouring records together, as the caller gave them).
                order = np.argsort(first, kind="stable")
                records = self.read_global(uniq[order], workers)
                rank = np.empty(len(order), dtype=np.intp)
                rank[order] = np.arange(len(order))
                return list(map(records.__getitem__, rank[inverse.reshape(-1)].tolist()))
        return self.read_global(idx, workers)

    def read_global(self, indices: np.ndarray, workers: int) -> List[bytes]:
        idx = np.ascontiguousarray(indices, dtype=np.uint64)
        n = len(idx)
        if self.fill_direct and n >= self.fill_min:
            return _records_filled(self.ptr, idx, workers, self.spec)
        if self.mapped:
            return list(self.iter_global(idx))
        out = ffi.new("a2pack_bag_batch **")
        check(lib.a2pack_bag_reader_read(
            self.ptr, ffi.from_buffer("uint64_t[]", idx), n, workers, out))
        return _records_of(out[0])


# Read-ahead runs batch reads on a small shared pool (the C call releases the
# GIL, so Python keeps slicing while the next batch is read). The pool is per
# process: a forked data-loader worker makes its own.
_POOL_LOCK = threading.Lock()
_POOL: Optional[tuple] = None
_READ_AHEAD_BATCHES = 2


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    pid = os.getpid()
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != pid:
            _POOL = (pid, concurrent.futures.ThreadPoolExecutor(
                max_workers=4, thread_name_prefix="a2pack-bag-read-ahead"))
        return _POOL[1]


def _read_now(jobs: Iterator, handle: "_Handle", workers: int) -> Iterator[Iterable[bytes]]:
    """Batches read in the consumer's thread: for records copied out of
    the mapping there is nothing to overlap. Ranges and strided positions
    are sliced out of their batch lazily, record by record; picks are read
    whole, as a repeated position must give the same object."""
    for job in jobs:
        if job[0] == "range":
            yield handle.iter_range(job[1], job[2])
        elif job[0] == "raise":
            raise job[1]
        elif job[0] == "picks":
            yield handle.read_picks(job[1], workers)
        else:
            yield handle.iter_global(job[1])


def _read_ahead(jobs: Iterator, handle: "_Handle", workers: int) -> Iterator[List[bytes]]:
    """Batches of records for `jobs`, in order, with the next batches already
    being read (and decompressed, in parallel) on the pool while the consumer
    works through the current one."""
    if handle.mapped:
        yield from _read_now(jobs, handle, workers)
        return
    pool = _pool()
    pending = collections.deque()

    def submit():
        job = next(jobs, None)
        if job is None:
            return False
        if job[0] == "range":
            pending.append(pool.submit(handle.read_range, job[1], job[2], workers))
        elif job[0] == "raise":
            # Raised only once every batch before it has been yielded.
            pending.append(_Raise(job[1]))
            return False
        elif job[0] == "picks":
            pending.append(pool.submit(handle.read_picks, job[1], workers))
        else:
            pending.append(pool.submit(handle.read_global, job[1], workers))
        return True

    for _ in range(_READ_AHEAD_BATCHES):
        if not submit():
            break
    try:
        while pending:
            fut = pending.popleft()
            if isinstance(fut, _Raise):
                raise fut.error
            submit()
            yield fut.result()
    finally:
        for f in pending:
            if not isinstance(f, _Raise):
                f.cancel()


class _Raise:
    """A read-ahead slot holding the error of the index source at that point."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


class ReaderIterator(itertools.chain):
    """Records in order, read in batches ahead of the consumer.

    A chain over the batches, so taking the next record is a C-level step."""

    @classmethod
    def _over(cls, jobs: Iterator, handle: "_Handle", workers: int) -> "ReaderIterator":
        return cls.from_iterable(_read_ahead(jobs, handle, workers))


# ---------------------------------------------------------------- reader

def _as_bytes(value) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


class Reader(Sequence):
    """Opens a collection of Bagz-formatted files (shards).

    Args:
      file_spec: a filename ("/path/foo.bagz"), a sharded spec
        ("/path/foo@100.bagz", "/path/foo@*.bagz"), a comma-separated list of
        those, or a list of paths.
      options: see `Reader.Options`.

    Readers are Sequences of bytes: len, indexing (negative too), slicing with
    any step (a slice is a Reader), iteration. They pickle by re-opening the
    same files, so they can be handed to multiprocessing data loaders.
    """

    Options = _ReaderOptions

    def __init__(self, file_spec: Union[str, os.PathLike, Sequence], options: Optional[_ReaderOptions] = None):
        if isinstance(file_spec, (list, tuple)):
            spec = [os.fspath(p) for p in file_spec]
        else:
            spec = os.fspath(file_spec)
            if isinstance(spec, bytes):
                spec = os.fsdecode(spec)
            # "posix:/x" and "/posix:/x" (pathlib's join) are resolved by the
            # library, as every other path it opens.
        self._spec = spec
        self._options = options if options is not None else _ReaderOptions()
        self._h = _Handle(spec, self._options)
        self._start, self._step, self._len = 0, 1, self._h.count

    # -- construction of slices and pickling
    @classmethod
    def _view(cls, base: "Reader", start: int, step: int, length: int) -> "Reader":
        r = cls.__new__(cls)
        r._spec, r._options, r._h = base._spec, base._options, base._h
        r._start, r._step, r._len = start, step, length
        return r

    def __getstate__(self):
        return (self._spec, self._options, self._start, self._step, self._len)

    def __setstate__(self, state):
        spec, options, start, step, length = state
        self._spec, self._options = spec, options
        self._h = _Handle(spec, options)
        self._start, self._step, self._len = start, step, length

    def __reduce__(self):
        return (_restore_reader, (self.__getstate__(),))

    # -- properties
    @property
    def options(self) -> _ReaderOptions:
        """The options used to open the reader."""
        return self._options

    @property
    def file_spec(self) -> str:
        """The file spec used to open the reader."""
        return ",".join(self._spec) if isinstance(self._spec, list) else self._spec

    def approximate_bytes_per_record(self) -> float:
        """Stored (possibly compressed) bytes per record of the opened files.

        Exact when the reader is opened; slices keep the value of the whole.
        """
        return self._h.stored_bytes / self._h.count if self._h.count else 0.0

    def __len__(self) -> int:
        return self._len

    def __repr__(self):
        return f"a2pack.bag.Reader({self.file_spec!r}, records={self._len})"

    # -- index arithmetic
    def _workers(self) -> int:
        return int(self._options.max_parallelism)

    def _global_indices(self, indices: np.ndarray) -> np.ndarray:
        """Local positions (numpy int64, negatives allowed) → global uint64."""
        n = self._len
        if indices.size:
            neg = indices < 0
            if neg.any():
                indices = np.where(neg, indices + n, indices)
            bad = (indices < 0) | (indices >= n)
            if bad.any():
                k = int(np.argmax(bad))
                raise errors.OutOfRangeError(
                    f"indices[{k}] = {int(indices[k]) - (n if neg[k] else 0)} out of range "
                    f"[{-n}, {n})", lib.A2PACK_E_OUT_OF_RANGE)
        if self._start == 0 and self._step == 1:
            return indices.astype(np.uint64)
        return (self._start + indices * self._step).astype(np.uint64)

    _BATCH_CHUNK_BYTES = 4 << 20
    _MAPPED_CHUNK_BYTES = 512 << 10

    def _chunk_records(self) -> int:
        """Records per batch while iterating: about 4 MiB stored. Read ahead,
        that is big enough to decompress in parallel. From a mapping, each
        chunk is copied into a batch buffer and its records are sliced out
        of it as they are taken: 512 KiB keeps that buffer in the cache for
        the second copy."""
        per = self.approximate_bytes_per_record() or 1.0
        chunk = self._MAPPED_CHUNK_BYTES if self._h.mapped else self._BATCH_CHUNK_BYTES
        return int(min(65536, max(16, chunk / per)))

    def _jobs(self, start: int, stop: int) -> Iterator:
        """Batch jobs covering local positions [start, stop)."""
        chunk = self._chunk_records()
        for a in range(start, stop, chunk):
            b = min(stop, a + chunk)
            if self._step == 1:
                yield ("range", self._start + a, b - a)
            else:
                yield ("indices", self._start + np.arange(a, b, dtype=np.int64) * self._step)

    # -- Sequence
    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = _slice_indices(index, self._len)
            length = len(range(start, stop, step))
            # A view of at most one record needs no step (a huge one, e.g.
            # r[::10**20], would not fit the int64 index arithmetic).
            return Reader._view(self, self._start + start * self._step if length else self._start,
                                self._step * step if length > 1 else 1, length)
        try:
            i = operator.index(index)
        except TypeError:
            raise TypeError(f"Reader indices must be integers or slices, not "
                            f"{type(index).__name__}") from None
        n = self._len
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise errors.OutOfRangeError(f"index {index} out of range [{-n}, {n})",
                                         lib.A2PACK_E_OUT_OF_RANGE)
        return self._h.read_range(self._start + i * self._step, 1, 1)[0]

    def __iter__(self) -> ReaderIterator:
        return ReaderIterator._over(self._jobs(0, self._len), self._h, self._workers())

    def __reversed__(self) -> "Reader":
        return self[::-1]

    def __contains__(self, value) -> bool:
        value = _as_bytes(value)
        return any(r == value for r in self)

    def count(self, value) -> int:
        """Number of records equal to value."""
        value = _as_bytes(value)
        return sum(1 for r in self if r == value)

    def index(self, value, start: int = 0, stop: Optional[int] = None) -> int:
        """Position of the first record equal to value in [start, stop).

        Raises ValueError when there is none.
        """
        value = _as_bytes(value)
        start, stop, _ = slice(start, stop).indices(self._len)
        for k, r in enumerate(ReaderIterator._over(self._jobs(start, stop), self._h, self._workers())):
            if r == value:
                return start + k
        raise ValueError("value is not in the Reader")

    # -- eager and batch reads
    def read(self) -> List[bytes]:
        """All the records of this reader (or slice)."""
        if not self._h.mapped:
            return list(iter(self))
        # Out of the mapping, no read-ahead, in chunks of about 4 MiB (large
        # records take the fill path there: one copy): a chunk of small
        # records is copied into a batch buffer before its records are made,
        # so a bigger one would only hold more memory twice.
        out: List[bytes] = []
        per = self.approximate_bytes_per_record() or 1.0
        step = int(min(1 << 20, max(16, self._BATCH_CHUNK_BYTES / per)))
        for a in range(0, self._len, step):
            b = min(self._len, a + step)
            if self._step == 1:
                out += self._h.read_range(self._start + a, b - a, 1)
            else:
                out += self._h.read_global(
                    self._start + np.arange(a, b, dtype=np.int64) * self._step, 1)
        return out

    def read_range(self, start: int, num_records: int) -> List[bytes]:
        """Records [start, start + num_records). Prefer slicing and read()."""
        start = operator.index(start)
        num_records = operator.index(num_records)
        if start < 0 or num_records < 0 or start + num_records > self._len:
            raise errors.OutOfRangeError(
                f"records [{start}, {start + num_records}) out of range [0, {self._len})",
                lib.A2PACK_E_OUT_OF_RANGE)
        return self[start:start + num_records].read()

    def read_range_iter(self, start: int, num_records: int, read_ahead: Optional[int] = None) -> ReaderIterator:
        """Iterator over records [start, start + num_records)."""
        start = operator.index(start)
        num_records = operator.index(num_records)
        if start < 0 or num_records < 0 or start + num_records > self._len:
            raise errors.OutOfRangeError(
                f"records [{start}, {start + num_records}) out of range [0, {self._len})",
                lib.A2PACK_E_OUT_OF_RANGE)
        return iter(self[start:start + num_records])

    def read_indices(self, indices) -> List[bytes]:
        """Records at the given positions (list, numpy integer array or slice),
        read in one parallel batch."""
        if isinstance(indices, slice):
            return self[indices].read()
        arr = _index_array(indices)
        if arr.size == 0:
            return []
        return self._h.read_picks(self._global_indices(arr), self._workers())

    def read_indices_iter(self, indices: Iterable[int], read_ahead: Optional[int] = None) -> ReaderIterator:
        """Records at the positions produced by `indices` (any iterable, even an
        infinite generator), in order. Batches of `read_ahead` positions (default
        256) are read in parallel ahead of the consumer."""
        size = 256 if read_ahead is None else max(1, int(read_ahead))
        source = iter(indices)

        def jobs():
            # As bagz: every record before a bad position is yielded, then
            # the error of that position is raised (the source's own error,
            # TypeError for a non-integer, OverflowError past 64 bits).
            while True:
                chunk: list = []
                error = None
                try:
                    # list.extend keeps the items taken before a raise.
                    chunk.extend(itertools.islice(source, size))
                except Exception as e:  # the source's error, at its position
                    error = e
                arr, bad = _checked_chunk(chunk)
                if bad is not None:
                    chunk, error = chunk[:bad[0]], bad[1]
                    arr = arr[:bad[0]]
                if len(arr):
                    try:
                        picks = self._global_indices(arr)
                    except errors.OutOfRangeError as e:
                        # As bagz: an index out of range fails its whole
                        # read_ahead batch (the batches before it are yielded).
                        yield ("raise", e)
                        return
                    yield ("picks", picks)
                if error is not None:
                    yield ("raise", error)
                    return
                if len(chunk) < size:
                    return

        return ReaderIterator._over(jobs(), self._h, self._workers())


class InvalidSliceError(errors.OutOfRangeError, ValueError):
    """A slice with step 0: an IndexError ("Invalid slice", as sackli) that is
    also the ValueError bagz and Python lists raise."""


class InvalidSliceBoundsError(InvalidSliceError, TypeError):
    """A slice whose bounds are not integers: sackli's ``IndexError("Invalid
    slice")``, and the TypeError that lists and bagz raise."""


def _slice_indices(index: slice, length: int) -> tuple:
    """slice.indices(length); a step of 0 or a bound that is not an integer
    (``slice("Not a number")``) is an InvalidSliceError, as sackli raises
    ``IndexError("Invalid slice")`` for both."""
    try:
        return index.indices(length)
    except ValueError as e:
        raise InvalidSliceError(f"Invalid slice {index!r}: {e}", lib.A2PACK_E_OUT_OF_RANGE) from None
    except TypeError as e:
        raise InvalidSliceBoundsError(f"Invalid slice {index!r}: {e}",
                                      lib.A2PACK_E_OUT_OF_RANGE) from None


def _restore_reader(state) -> Reader:
    r = Reader.__new__(Reader)
    r.__setstate__(state)
    return r


def _checked_chunk(chunk: list) -> tuple:
    """(int64 array of the leading valid items, None or (position, error) of
    the first item that is not an integer or does not fit 64 bits)."""
    arr = np.asarray(chunk) if chunk else np.empty(0, dtype=np.int64)
    if arr.dtype.kind in "iu" and arr.ndim == 1 and arr.dtype != np.uint64:
        return arr.astype(np.int64, copy=False), None
    good = []
    for k, item in enumerate(chunk):
        try:
            i = operator.index(item)
            if not -(1 << 63) <= i < (1 << 64):
                raise OverflowError(f"index {i} does not fit in 64 bits")
            if i >= (1 << 63):
                raise errors.OutOfRangeError(f"index {i} out of range", lib.A2PACK_E_OUT_OF_RANGE)
        except Exception as e:
            return np.array(good, dtype=np.int64), (k, e)
        good.append(i)
    return np.array(good, dtype=np.int64), None


def _index_array(indices) -> np.ndarray:
    arr = np.asarray(indices)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype == np.uint64:
        if arr.max() > np.iinfo(np.int64).max:
            raise errors.OutOfRangeError(f"index {int(arr.max())} out of range",
                                         lib.A2PACK_E_OUT_OF_RANGE)
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        if arr.dtype == object:
            try:
                return np.array([operator.index(i) for i in arr], dtype=np.int64)
            except TypeError:
                pass
        raise TypeError(f"indices must be integers, not {arr.dtype}")
    return arr.astype(np.int64, copy=False)


# ---------------------------------------------------------------- writer

# A record this large goes to the library at once, not joined with others.
# A module constant: write() runs once per record, and a global is read
# faster than a class attribute through the instance (~20 ns of ~800 ns).
_LARGE_RECORD = 1 << 20


class Writer:
    """Writes one Bagz file.

    Use as a context manager so the file is closed::

        with Writer(filename) as writer:
            for record in records:
                writer.write(record)

    The file (and for SEPARATE placement its "limits." sibling) appears under
    its name only at close(); a writer left by an exception or never closed
    leaves no file behind. Records are buffered here and handed to the
    library in batches (about 64 KiB stored, 4 MiB compressed). Compressed
    batches are compressed in parallel on a background thread while the
    caller goes on producing the next one, so an error of one batch is raised
    by a later write(), flush() or close().

    Args:
      filename: the file to write.
      options: see `Writer.Options`.
    """

    Options = _WriterOptions

    # Stored records are joined in chunks of about 64 KiB — below glibc's mmap
    # threshold, so each join reuses warm heap memory (a fresh 1 MiB join
    # page-faults its way through new memory at a third of the speed) — and
    # each chunk handed to the library at once, in this thread: the library
    # copies it into its buffers and a thread of its own makes the write
    # calls (a Python thread here would wait for the GIL). Compressed records
    # go in calls of about 4 MiB, enough records to keep every core
    # compressing, on a background thread, so the caller fills the next call
    # meanwhile.
    _CHUNK_BYTES_STORED = 64 << 10
    _CHUNK_BYTES_ZSTD = 4 << 20
    _BUFFER_RECORDS = 16384

    def __init__(self, filename: Union[str, os.PathLike], options: Optional[_WriterOptions] = None):
        self._options = options if options is not None else _WriterOptions()
        o = ffi.new("a2pack_bag_writer_options *")
        lib.a2pack_bag_writer_options_init(o)
        comp, level, dictionary = _compression_fields(self._options.compression)
        o.compression = comp
        o.zstd_level = level
        keep = None
        if dictionary:
            keep = ffi.from_buffer("uint8_t[]", dictionary)
            o.zstd_dictionary = keep
            o.zstd_dictionary_len = len(dictionary)
        o.limits_placement = _enum(self._options.limits_placement, LimitsPlacement).value
        o.durable = 1 if getattr(self._options, "durable", True) else 0
        o.direct_io = 1 if getattr(self._options, "direct_io", True) else 0
        out = ffi.new("a2pack_bag_writer **")
        check(lib.a2pack_bag_writer_open(fspath(filename), o, out))
        del keep
        self._w = out[0]
        self._buf: Optional[List[bytes]] = []
        self._pending = None  # the call in flight on the pool, if any
        self._batch_records = 16  # records per chunk; adapts to about _chunk_bytes
        compressed = comp == lib.A2PACK_BAG_COMPRESSION_ZSTD or (
            comp == lib.A2PACK_BAG_COMPRESSION_AUTO and os.fspath(filename).endswith(
                b".bagz" if isinstance(os.fspath(filename), bytes) else ".bagz"))
        self._chunk_bytes = self._CHUNK_BYTES_ZSTD if compressed else self._CHUNK_BYTES_STORED
        self._background = compressed
        self._closed = False

    @property
    def options(self) -> _WriterOptions:
        return self._options

    def _check_open(self):
        if self._closed:
            raise errors.ClosedError("Writer is closed", lib.A2PACK_E_CLOSED)

    def _write_batch(self, data, offsets, n: int) -> None:
        # On a pool thread: the C call releases the GIL, so the caller keeps
        # filling the next batch meanwhile. Errors are thread-local in C, so
        # the status is checked here, in the thread that made the call.
        check(lib.a2pack_bag_writer_write_batch(self._w, data, offsets, n))

    def _wait(self) -> None:
        """Wait for the call in flight; raises its error, if any."""
        pending = self._pending
        if pending is not None:
            self._pending = None
            pending.result()

    def _submit(self, data, offsets, n: int) -> None:
        # One call in flight: the C writer takes one call at a time, records
        # must land in order, and memory stays at two batches.
        self._wait()
        self._pending = _pool().submit(self._write_batch, data, offsets, n)

    def _drain(self):
        """Join the buffered records into one call."""
        buf = self._buf
        if not buf:
            return
        self._buf = []
        n = len(buf)
        data = b"".join(buf)  # one record: itself, no copy
        # The record count adapts to the sizes seen.
        self._batch_records = max(1, min(self._BUFFER_RECORDS,
                                         self._chunk_bytes // max(1, len(data) // n)))
        # array.array builds the offsets in C (ffi.new from a list costs
        # ~0.4 us an item, as much as the rest of a record's write).
        offsets = ffi.from_buffer("uint64_t[]", array.array(
            "Q", itertools.accumulate(map(len, buf), initial=0)))
        if self._background:
            self._submit(data, offsets, n)
        else:
            check(lib.a2pack_bag_writer_write_batch(self._w, data, offsets, n))

    def write(self, record: Union[str, bytes]) -> None:
        """Append a record (compressed according to the options)."""
        if type(record) is not bytes:
            record = record.encode("utf-8") if isinstance(record, str) else bytes(record)
        buf = self._buf
        if buf is None:
            raise errors.ClosedError("Writer is closed", lib.A2PACK_E_CLOSED)
        buf.append(record)
        # The count adapts to record sizes; a large record goes out at once.
        if len(buf) >= self._batch_records or len(record) >= _LARGE_RECORD:
            self._drain()

    def flush(self) -> None:
        """Hand every buffered record to the operating system (the file keeps
        its temporary name until close)."""
        self._check_open()
        self._drain()
        self._wait()
        check(lib.a2pack_bag_writer_flush(self._w))

    def close(self) -> None:
        """Finish the file: write the limits and move it into place. Closing
        twice is harmless."""
        if self._closed:
            return
        try:
            self._drain()
            self._wait()
            check(lib.a2pack_bag_writer_commit(self._w))
        finally:
            self._abandon()

    def _abandon(self) -> None:
        if not self._closed:
            self._closed = True
            self._buf = None
            # The pool thread may still be inside the C writer: let it finish
            # before the writer is freed.
            pending, self._pending = self._pending, None
            if pending is not None:
                concurrent.futures.wait([pending])
            lib.a2pack_bag_writer_close(self._w)
            self._w = ffi.NULL

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        if exc_type is None:
            self.close()
        else:
            self._abandon()

    def __del__(self):
        # Never committed: the library removes the temporary files.
        if not getattr(self, "_closed", True):
            self._abandon()


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
