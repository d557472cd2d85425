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

import itertools
import operator
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import List, Optional, Union

import numpy as np

from . import errors
from ._native import fspath, lib
# The public names the other modules define, so that `a2pack.bag` is the one
# module a user imports (as sackli's is).
from ._bag_options import (AccessPattern, CachePolicy, CompressionAutoDetect, CompressionNone,
                           CompressionZstd, LimitsPlacement, LimitsStorage, ShardingLayout,
                           _ReaderOptions)
from ._bag_batches import ReaderIterator, UnreferencedBytesWarning, _Handle
from ._bag_writer import Writer

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


from ._bag_index import Index, MultiIndex  # noqa: E402  (it reads this module's Reader)
