"""Batches of records from the library to Python: bytes objects filled
straight from the C reader, the reader handle every Reader and slice shares,
and the read-ahead thread pool (a2pack.bag).
"""

from __future__ import annotations

import collections
import concurrent.futures
import ctypes
import itertools
import os
import threading
import warnings
from collections.abc import Iterable, Iterator
from typing import List, Optional

import numpy as np

from . import errors
from ._native import check, ffi, fspath, lib
from ._bag_options import _ReaderOptions


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
