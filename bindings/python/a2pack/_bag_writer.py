"""The bag Writer: records to a .bag/.bagz file that appears whole when
closed (a2pack.bag).
"""

from __future__ import annotations

import array
import concurrent.futures
import itertools
import os
from typing import List, Optional, Union

from . import errors
from ._native import check, ffi, fspath, lib
from ._bag_options import LimitsPlacement, _WriterOptions, _compression_fields, _enum
from ._bag_batches import _pool


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
