"""ReadFromBag / WriteToBag: record files (Bagz / Säckli) on Apache Beam.

Same arguments and behaviour as ``bagz.beam.bagzio.ReadFromBagz`` /
``WriteToBagz`` (and sackli's), so their pipelines run after changing the
import. The read is a bounded source over the global record indices of all
the shards: split into bundles up front, and each bundle reads through an
``OffsetRangeTracker`` that a runner may split again while it reads (dynamic
work rebalancing). The reader fetches and claims records in chunks of 256
(one library call, one claim) and the tracker moves a split asked for inside
a chunk to the chunk's end, so records past a split point are left to the
other half and none is read twice. The write batches records (lists of 1024
per element) before Beam's shuffle to the shards.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

from apache_beam import io as beam_io
from apache_beam import pvalue, transforms
from apache_beam.coders import coders
from apache_beam.io import filebasedsink, filesystem, iobase, range_trackers
from apache_beam.transforms import display
from apache_beam.transforms.util import BatchElements

from .. import bag as _bag
from ._common import ReopensOnWorkers, counter, parse_output_spec, records_per_bundle

# Records per element between WriteToBag's batching and its sink.
_WRITE_BATCH = 1024

# Records fetched per call into the library while a bundle is read: large
# enough that the per-call cost vanishes, small enough that a dynamic split
# wastes little read-ahead.
_READ_CHUNK = 256


class WriteToBag(transforms.PTransform[pvalue.PCollection[Any], pvalue.PCollection[str]]):
    """Write a PCollection to record files.

    ``file_path`` is ``<dir>/<name>@<N><.ext>.(bagz|bag)`` (N shards, ``*``:
    the runner chooses, ``0``: one file without a shard part) or
    ``<dir>/<name><.ext>.(bagz|bag)@0``. ``.bagz`` files are zstd-compressed
    per record, ``.bag`` files are not (by extension, as bagz does). Each
    element is encoded with ``coder`` (bytes by default). Files appear only
    when complete (each shard is written under a temporary name and moved
    into place when the pipeline finishes).
    """

    def __init__(self, file_path: Union[str, os.PathLike[str]],
                 coder: coders.Coder = coders.BytesCoder(),
                 compression_type: str = filesystem.CompressionTypes.AUTO) -> None:
        prefix, suffix, num_shards, template = parse_output_spec(
            file_path, ("bag", "bagz"), "record files")
        self._sink = _BagSink(prefix, suffix, num_shards, template, coder, compression_type)

    def expand(self, pcoll: pvalue.PCollection[Any]) -> pvalue.PCollection[str]:
        # Records travel to the sink in lists of up to _WRITE_BATCH: with a
        # fixed shard count Beam's write shuffles every element to its shard
        # (a GroupByKey), and on a runner each element of a shuffle costs
        # tens of microseconds, far more than writing the record; a list is
        # one element. The sink writes a list's records in order.
        batched = pcoll | "Batch" >> BatchElements(min_batch_size=_WRITE_BATCH,
                                                   max_batch_size=_WRITE_BATCH)
        written: pvalue.PCollection[str] = batched | beam_io.iobase.Write(self._sink)
        return written

    def display_data(self) -> Dict[str, Any]:
        # FileBasedSink.display_data is unannotated in Beam.
        items: Dict[str, Any] = self._sink.display_data()  # type: ignore[no-untyped-call]
        return items


class _BagSink(filebasedsink.FileBasedSink):
    def __init__(self, prefix: str, suffix: str, num_shards: int, template: Optional[str],
                 coder: coders.Coder, compression_type: str) -> None:
        # FileBasedSink.__init__ is unannotated in Beam.
        super().__init__(prefix, file_name_suffix=suffix, num_shards=num_shards,  # type: ignore[no-untyped-call]
                         shard_name_template=template, coder=coder,
                         mime_type="application/octet-stream",
                         compression_type=compression_type)

    # The library's writer picks the compression from the temporary file's
    # extension, which FileBasedSink keeps (it ends in file_name_suffix).
    def open(self, temp_path: str) -> _CountingWriter:
        return _CountingWriter(_bag.Writer(temp_path))

    # What WriteToBag hands the sink: a list of elements (see expand).
    def write_record(self, handle: _CountingWriter, batch: List[Any]) -> None:
        write = handle.writer.write
        if type(self.coder) is coders.BytesCoder and all(type(v) is bytes for v in batch):
            data_list: List[bytes] = batch  # BytesCoder's encode is the identity on bytes
        else:
            data_list = list(map(self.coder.encode, batch))
        for data in data_list:
            write(data)
        handle.records += len(data_list)
        handle.bytes += sum(map(len, data_list))

    def write_encoded_record(self, handle: _CountingWriter, value: bytes) -> None:
        handle.writer.write(value)
        handle.records += 1
        handle.bytes += len(value)

    # Counters are added once per file: a Metrics call per record costs more
    # than writing the record.
    def close(self, handle: _CountingWriter) -> None:
        handle.writer.close()
        counter("records_written").inc(handle.records)
        counter("bytes_written").inc(handle.bytes)


class _CountingWriter:
    __slots__ = ("writer", "records", "bytes")

    def __init__(self, writer: _bag.Writer) -> None:
        self.writer, self.records, self.bytes = writer, 0, 0


class _ChunkRangeTracker(range_trackers.OffsetRangeTracker):
    """An OffsetRangeTracker over record indices whose splits fall on chunk
    boundaries (start + a multiple of `chunk`): a split asked for inside a
    chunk moves up to the chunk's end, so the reader claims one index per
    chunk and still never reads a record the residual also reads."""

    # OffsetRangeTracker is unannotated in Beam.
    def __init__(self, start: int, stop: int, chunk: int) -> None:
        super().__init__(start, stop)  # type: ignore[no-untyped-call]
        self._chunk = chunk

    def try_split(self, split_offset: int) -> Any:
        start: int = self.start_position()  # type: ignore[no-untyped-call]
        rounded = start + -(-(split_offset - start) // self._chunk) * self._chunk
        return super().try_split(rounded)  # type: ignore[no-untyped-call]


class ReadFromBag(transforms.PTransform[pvalue.PBegin, pvalue.PCollection[Any]]):
    """Read the records of ``file_pattern`` (a file, ``name@N.bagz``,
    ``name@*.bagz`` or a comma-separated list, as :class:`a2pack.bag.Reader`
    takes), decoding each with ``coder``.

    ``records_per_split`` (a2pack's addition) caps the records of an initial
    bundle, to spread small inputs with heavy per-record work over workers.
    """

    def __init__(self, file_pattern: Union[str, os.PathLike[str]],
                 coder: coders.Coder = coders.BytesCoder(),
                 compression_type: str = filesystem.CompressionTypes.AUTO, *,
                 records_per_split: Optional[int] = None) -> None:
        self._source = _BagSource(os.fspath(file_pattern), coder, compression_type,
                                  records_per_split)

    def expand(self, pbegin: pvalue.PBegin) -> pvalue.PCollection[Any]:
        records: pvalue.PCollection[Any] = pbegin | iobase.Read(self._source)
        return records

    def display_data(self) -> Dict[str, Any]:
        items: Dict[str, Any] = self._source.display_data()
        return items


def _open(file_pattern: str) -> _bag.Reader:
    # One thread per reader: the runner already reads bundles in parallel, and
    # handing a 256-record chunk to a thread pool cost more than reading it
    # (the source read 1.6 to 3x slower with the default pool on 2 cores).
    return _bag.Reader(file_pattern, _bag.Reader.Options(max_parallelism=1))


def _read_chunk(reader: _bag.Reader, start: int, n: int) -> List[bytes]:
    """Records [start, start + n) read by the library on this thread. The
    public Reader.read_range of a .bagz file goes through the reader's
    read-ahead iterator (a thread pool), which for one 256-record chunk costs
    about as much again as the read; the reader's handle reads the range in
    one call."""
    records: List[bytes] = reader._h.read_range(start, n, 1)  # type: ignore[attr-defined]
    return records


class _BagSource(ReopensOnWorkers, iobase.BoundedSource):
    _reopened = ("_reader",)
    _reader: Optional[_bag.Reader]

    def __init__(self, file_pattern: str, coder: coders.Coder, compression_type: str,
                 records_per_split: Optional[int] = None) -> None:
        self._file_pattern = file_pattern
        self._coder = coder
        self._compression_type = compression_type
        self._records_per_split = records_per_split
        # Records per library call and per claim; no more than a bundle.
        self._chunk = min(_READ_CHUNK, records_per_split or _READ_CHUNK)
        self._reader = _open(file_pattern)  # fails here, at construction, on a bad spec

    @property
    def reader(self) -> _bag.Reader:
        if self._reader is None:
            self._reader = _open(self._file_pattern)
        return self._reader

    def estimate_size(self) -> int:
        # + 8: each record's entry in the index.
        return int((self.reader.approximate_bytes_per_record() + 8) * len(self.reader))

    def split(self, desired_bundle_size: int, start_position: Optional[int] = None,
              stop_position: Optional[int] = None) -> Iterator[iobase.SourceBundle]:
        start = 0 if start_position is None else start_position
        stop = len(self.reader) if stop_position is None else stop_position
        step = records_per_bundle(desired_bundle_size,
                                  self.reader.approximate_bytes_per_record() + 8,
                                  self._records_per_split)
        for a in range(start, stop, step):
            b = min(a + step, stop)
            yield iobase.SourceBundle(weight=b - a, source=self, start_position=a,
                                      stop_position=b)

    def get_range_tracker(self, start_position: Optional[int],
                          stop_position: Optional[int]) -> _ChunkRangeTracker:
        start = 0 if start_position is None else start_position
        stop = len(self.reader) if stop_position is None else stop_position
        return _ChunkRangeTracker(start, stop, self._chunk)

    def read(self, range_tracker: iobase.RangeTracker) -> Iterator[Any]:
        reader = self.reader
        plain = type(self._coder) is coders.BytesCoder  # its decode is the identity
        decode: Callable[[bytes], Any] = self._coder.decode
        n_read, n_bytes = counter("records_read"), counter("bytes_read")
        claim: Callable[[int], bool] = range_tracker.try_claim
        chunk = self._chunk
        pos = range_tracker.start_position()
        # One claim per chunk: the tracker splits only at chunk boundaries
        # (_ChunkRangeTracker), so a claimed chunk is this reader's whole.
        # A claim per record cost as much as the rest of a record's read.
        while claim(pos):
            k = min(chunk, range_tracker.stop_position() - pos)
            records: List[bytes] = _read_chunk(reader, pos, k)
            # Counters are added once per chunk: a Metrics call per record
            # costs as much as the rest of the per-record work.
            n_read.inc(k)
            n_bytes.inc(sum(map(len, records)))
            if plain:
                yield from records
            else:
                for rec in records:
                    yield decode(rec)
            pos += k

    def display_data(self) -> Dict[str, Any]:
        return {
            "file_pattern": display.DisplayDataItem(self._file_pattern, label="File Pattern"),
            "compression": display.DisplayDataItem(str(self._compression_type),
                                                   label="Compression Type"),
            "coder": display.DisplayDataItem(self._coder.__class__.__name__, label="Coder"),
        }
