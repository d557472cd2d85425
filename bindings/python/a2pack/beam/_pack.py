"""Runs on Apache Beam: ReadFromPack and ReadRunFiles (WriteToPack is in
_pack_write.py).

``ReadFromPack`` is a bounded source over the entries of one or more
packfiles (a glob), indexed globally in sorted file order, split by entry
ranges like ReadFromBag. Entries are decoded in batches, in parallel, by the
library. A bad entry (CRC mismatch, undecodable run) is counted in
``bad_runs_skipped``, logged with its file and index, and skipped, unless
``skip_bad=False``.
"""

from __future__ import annotations

import glob
import logging
import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import apache_beam as beam
from apache_beam import pvalue, transforms
from apache_beam.io import iobase, range_trackers
from apache_beam.transforms import display, window

from ..errors import Error
from ..pack import PackReader
from ..run import RunV2
from ._common import ReopensOnWorkers, counter, records_per_bundle
from ._order import position

_LOG = logging.getLogger("a2pack.beam")
_READ_CHUNK = 64  # entries decoded per library call

# (entry index, the run or its bytes, None) for a good entry; (entry index,
# None, the error) for a bad one.
_Fetched = Tuple[int, Union[RunV2, bytes, None], Optional[Error]]


def _match(path_or_glob: str) -> List[str]:
    if glob.has_magic(path_or_glob):
        files = sorted(glob.glob(path_or_glob))
        if not files:
            raise FileNotFoundError(f"{path_or_glob}: no packfile matches")
        return files
    return [path_or_glob]


class ReadFromPack(transforms.PTransform[pvalue.PBegin, pvalue.PCollection[Any]]):
    """The runs of the packfile(s) ``path_or_glob``: :class:`~a2pack.RunV2`
    objects (``decoded=True``) or each entry's run-file bytes. With
    ``with_index=True`` each element is ``(global_entry_index, run)``, the
    order key :class:`BuildDataset` takes. ``records_per_split`` caps the
    entries of an initial bundle (decoding is CPU work, so a small pack may
    deserve more bundles than its bytes suggest).

    Each element's Beam timestamp is its global entry index (in
    microseconds): its source position, by which :class:`BuildDataset` and
    :class:`WriteToPack` put bare runs back in pack order."""

    def __init__(self, path_or_glob: Union[str, os.PathLike[str]], decoded: bool = True, *,
                 with_index: bool = False, verify: bool = True, skip_bad: bool = True,
                 records_per_split: Optional[int] = None, decode_workers: int = 1) -> None:
        self._source = _PackSource(os.fspath(path_or_glob), decoded, with_index, verify,
                                   skip_bad, records_per_split, decode_workers)

    def expand(self, pbegin: pvalue.PBegin) -> pvalue.PCollection[Any]:
        runs: pvalue.PCollection[Any] = pbegin | iobase.Read(self._source)
        return runs

    def display_data(self) -> Dict[str, Any]:
        return self._source.display_data()


class _PackSource(ReopensOnWorkers, iobase.BoundedSource):
    _reopened = ("_readers",)
    _readers: Optional[List[PackReader]]

    def __init__(self, pattern: str, decoded: bool, with_index: bool, verify: bool,
                 skip_bad: bool, records_per_split: Optional[int], decode_workers: int) -> None:
        self._pattern = pattern
        self._decoded = decoded
        self._with_index = with_index
        self._verify = verify
        self._skip_bad = skip_bad
        self._records_per_split = records_per_split
        self._decode_workers = decode_workers
        self._files = _match(pattern)
        readers = [PackReader(f) for f in self._files]  # opening checks every index
        self._counts = [len(r) for r in readers]
        self._bytes = sum(os.path.getsize(f) for f in self._files)
        self._readers = readers

    @property
    def readers(self) -> List[PackReader]:
        if self._readers is None:
            self._readers = [PackReader(f) for f in self._files]
        return self._readers

    def _total(self) -> int:
        return sum(self._counts)

    def estimate_size(self) -> int:
        return self._bytes

    def split(self, desired_bundle_size: int, start_position: Optional[int] = None,
              stop_position: Optional[int] = None) -> Iterator[iobase.SourceBundle]:
        start = 0 if start_position is None else start_position
        stop = self._total() if stop_position is None else stop_position
        per = self._bytes / max(self._total(), 1)
        step = records_per_bundle(desired_bundle_size, per, self._records_per_split)
        for a in range(start, stop, step):
            b = min(a + step, stop)
            yield iobase.SourceBundle(weight=b - a, source=self, start_position=a,
                                      stop_position=b)

    def get_range_tracker(self, start_position: Optional[int],
                          stop_position: Optional[int]) -> range_trackers.OffsetRangeTracker:
        start = 0 if start_position is None else start_position
        stop = self._total() if stop_position is None else stop_position
        return range_trackers.OffsetRangeTracker(start, stop)

    def _locate(self, g: int) -> Tuple[int, int]:
        for f, n in enumerate(self._counts):
            if g < n:
                return f, g
            g -= n
        raise IndexError(g)

    def _fetch(self, reader: PackReader, entries: List[int], f: int) -> List[_Fetched]:
        """(entry, run-or-bytes, error) for each entry, in order."""
        verify = None if self._verify else False
        try:
            runs: Sequence[Union[RunV2, bytes]]
            if self._decoded:
                runs = reader.decode_batch(entries, self._decode_workers, verify)
            else:
                runs = [reader.read(i, verify) for i in entries]
            return [(i, r, None) for i, r in zip(entries, runs)]
        except Error:
            pass
        # One entry of the batch is bad: find which, one by one.
        out: List[_Fetched] = []
        for i in entries:
            try:
                out.append((i, reader.decode(i, verify) if self._decoded else reader.read(i, verify),
                            None))
            except Error as e:
                out.append((i, None, e))
        return out

    def read(self, range_tracker: iobase.RangeTracker) -> Iterator[Any]:
        claim: Callable[[int], bool] = range_tracker.try_claim
        start: int = range_tracker.start_position()
        n_read, n_bytes, n_bad = (counter("records_read"), counter("bytes_read"),
                                  counter("bad_runs_skipped"))
        pos = start
        while True:
            stop: int = range_tracker.stop_position()
            if pos >= stop:
                return
            f, local = self._locate(pos)
            k = min(_READ_CHUNK, stop - pos, self._counts[f] - local)
            reader = self.readers[f]
            done = nbytes = 0  # counters are added once per chunk
            try:
                for i, run, err in self._fetch(reader, list(range(local, local + k)), f):
                    if not claim(pos):
                        return
                    g, pos = pos, pos + 1
                    if err is not None:
                        if not self._skip_bad:
                            raise err
                        n_bad.inc()
                        _LOG.warning("skipping %s entry %d: %s", self._files[f], i, err)
                        continue
                    done += 1
                    nbytes += reader.entry(i).raw_length
                    # The entry index as the element's timestamp: its source
                    # position, by which BuildDataset and WriteToPack order
                    # bare runs (_order.py).
                    yield window.TimestampedValue((g, run) if self._with_index else run,
                                                  position(g))
            finally:
                n_read.inc(done)
                n_bytes.inc(nbytes)

    def display_data(self) -> Dict[str, Any]:
        return {
            "path_or_glob": display.DisplayDataItem(self._pattern, label="Packfiles"),
            "files": display.DisplayDataItem(len(self._files), label="Files matched"),
            "entries": display.DisplayDataItem(self._total(), label="Entries"),
            "decoded": display.DisplayDataItem(self._decoded, label="Decoded runs"),
            "skip_bad": display.DisplayDataItem(self._skip_bad, label="Skip bad entries"),
        }


class ReadRunFiles(transforms.PTransform[pvalue.PBegin, pvalue.PCollection[Tuple[bytes, bytes]]]):
    """Every ``*.a2run2`` under ``folder`` (recursively) as ``(key, bytes)``,
    where the key is the path relative to the folder as bytes: sorted keys are
    the order ``a2pack dataset build`` gives the runs of that folder. Each
    element's Beam timestamp is the file's index in that order (its source
    position, for the runs' order after ``beam.Values()``)."""

    def __init__(self, folder: Union[str, os.PathLike[str]]) -> None:
        self._folder = os.fspath(folder)

    def expand(self, pbegin: pvalue.PBegin) -> pvalue.PCollection[Tuple[bytes, bytes]]:
        root = self._folder
        rel: List[str] = []
        for d, _dirs, files in os.walk(root):
            for name in files:
                # The files the library lists: regular files (or links to
                # them) whose extension is .a2run2 (".a2run2" alone has none).
                path = os.path.join(d, name)
                if name.endswith(".a2run2") and name != ".a2run2" and os.path.isfile(path):
                    rel.append(os.path.relpath(path, root))
        if not rel:
            raise FileNotFoundError(f"{root}: no .a2run2 files under it")
        rel.sort(key=os.fsencode)
        keyed: pvalue.PCollection[Tuple[bytes, bytes]] = (
            pbegin
            | "ListRunFiles" >> beam.Create(list(enumerate(rel)))
            | "ReadRunFile" >> beam.Map(_read_run_file, root))
        return keyed

    def display_data(self) -> Dict[str, Any]:
        return {"folder": display.DisplayDataItem(self._folder, label="Run folder")}


def _read_run_file(item: Tuple[int, str], root: str
                   ) -> "window.TimestampedValue[Tuple[bytes, bytes]]":
    index, rel = item
    with open(os.path.join(root, rel), "rb") as f:
        data = f.read()
    counter("records_read").inc()
    counter("bytes_read").inc(len(data))
    return window.TimestampedValue((os.fsencode(rel), data), position(index))
