"""WriteToPack: runs in, packfiles out, entries in the runs' order whatever
order the runner delivers them in.

Three steps, so that no worker holds more than one run's bytes and the
order-keys of all runs:

1. *Stage* (every worker, per bundle): each run's bytes are appended to a
   staging file of the bundle, under a temporary folder beside the output;
   the bundle reports each run's sort key (:mod:`._order`), offset, length
   and CRC.
2. *Plan* (once): sorts the keys (no run data), cuts the sorted runs into
   the shards (consecutive runs per shard, shard 0 first), and hands each
   shard its list of staged runs.
3. *Write* (one worker per shard): reads its runs back from the staging
   files in order and writes the shard with :class:`~a2pack.PackWriter`,
   which makes it appear only complete; then the temporary folder goes.

The same input makes the same files on any runner with any parallelism: for
a folder, ``ReadRunFiles(folder) | WriteToPack("runs.a2pack")`` writes the
bytes of ``a2pack pack -i folder -o runs.a2pack``.
"""

from __future__ import annotations

import os
import uuid
import zlib
from typing import IO, Any, Dict, Iterable, Iterator, List, Optional, Tuple

import apache_beam as beam
from apache_beam import pvalue, transforms
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import display, window
from apache_beam.utils.timestamp import Timestamp

from ..errors import Error
from ..pack import PackWriter
from ..run import RunV2
from ._common import counter, parse_output_spec
from ._order import SortKey, inputs, label, run_bytes, sort_keys, split

#: With ``name@*.a2pack`` (the count left to the writer): one shard per this
#: many bytes of runs, at least one; a count from the data alone, not from
#: how the runner bundled it, so that the files are reproducible.
AUTO_SHARD_BYTES = 1 << 30
_OPEN_STAGES = 32  # staging files a shard writer keeps open at once

# One staged run: (sort key, offset, length, CRC-32 of its bytes).
_Staged = Tuple[SortKey, int, int, int]
# One run of a shard: (label for errors, staging file, offset, length, CRC-32).
_Planned = Tuple[str, str, int, int, int]


class WriteToPack(transforms.PTransform[Any, pvalue.PCollection[str]]):
    """Write runs to a packfile, or to shards of one.

    ``path`` is a plain file name (one pack) or a shard spec as for
    :class:`WriteToBag` with the extension ``.a2pack`` (``runs@4.a2pack``:
    4 shards; ``runs@*.a2pack``: one shard per GiB of runs). Keyword
    arguments go to :class:`~a2pack.PackWriter` (``compress="zstd"``,
    ``align``, ...). Each pack appears only complete. The output holds the
    names of the files written.

    Elements are runs (:class:`~a2pack.RunV2` or run-file bytes) or
    ``(key, run)`` pairs. Entries follow the keys (relative-path keys, as
    ``ReadRunFiles`` gives, component by component: the order of
    ``a2pack pack``), and bare runs their source position, which
    ``ReadFromPack`` and ``ReadRunFiles`` stamp on each element as its Beam
    timestamp (then a digest of their bytes, for runs without one); shard 0
    holds the first runs. Several inputs, as a tuple ``(a, b) |
    WriteToPack(...)``, follow one another in tuple order. So the files never
    depend on the runner or its parallelism.
    """

    def __init__(self, path: "str | os.PathLike[str]", **writer_options: Any) -> None:
        path = os.fspath(path)
        if "@" not in os.path.basename(path):
            path = path + "@0"
        self._prefix, self._suffix, self._num_shards, self._template = parse_output_spec(
            path, ("a2pack",), "packfiles")
        if "expected_count" in writer_options:
            raise TypeError("WriteToPack: expected_count is set per shard by the transform")
        self._options = dict(writer_options)

    def expand(self, pvalueish: Any) -> pvalue.PCollection[str]:
        ins = inputs(pvalueish, "WriteToPack")
        p = ins[0].pipeline
        temp = (p | "Start" >> beam.Create([None])
                | "MakeTempDir" >> beam.Map(_make_temp_dir, self._prefix))
        staged = [pc | (f"Stage{i}" if i else "Stage") >> beam.ParDo(
            _StageFn(i), pvalue.AsSingleton(temp)) for i, pc in enumerate(ins)]
        all_staged = (tuple(staged) | "FlattenStaged" >> beam.Flatten()
                      if len(staged) > 1 else staged[0])
        written = (p | "Once" >> beam.Create([None])
                   | "Plan" >> beam.FlatMap(_plan, pvalue.AsList(all_staged), self._prefix,
                                            self._suffix, self._num_shards, self._template)
                   | "Spread" >> beam.Reshuffle()
                   | "WriteShards" >> beam.ParDo(_WriteShardFn(self._options)))
        done: pvalue.PCollection[str] = (
            p | "Last" >> beam.Create([None])
            | "Finish" >> beam.FlatMap(_finish, pvalue.AsList(written), pvalue.AsSingleton(temp)))
        return done

    def display_data(self) -> Dict[str, Any]:
        shards = ("" if self._template == "" else
                  "-SSSSS-of-NNNNN" if self._num_shards else "-SSSSS-of-NNNNN (one per GiB)")
        return {
            "file_pattern": display.DisplayDataItem(self._prefix + shards + self._suffix,
                                                    label="File Pattern"),
            "num_shards": display.DisplayDataItem(self._num_shards, label="Shards (0: by size)"),
            "writer_options": display.DisplayDataItem(repr(self._options), label="PackWriter"),
        }


def _make_temp_dir(_: None, prefix: str) -> str:
    folder, name = os.path.split(prefix)
    temp = FileSystems.join(folder or ".", f".a2pack-beam-temp-{name}-{uuid.uuid4().hex}")
    FileSystems.mkdirs(temp)
    return temp


class _StageFn(beam.DoFn):
    """Appends each run of a bundle to the bundle's staging file; at the end
    of the bundle emits (file, [(sort key, offset, length, crc)])."""

    def __init__(self, input_no: int) -> None:
        self._input_no = input_no

    def start_bundle(self) -> None:
        self._file: Optional[IO[bytes]] = None
        self._path = ""
        self._staged: List[_Staged] = []
        self._at = 0

    # Beam fills `timestamp` in (its default is a marker object, not a Timestamp).
    # Nothing is emitted per element (finish_bundle emits the bundle's file):
    # an empty iterable, since Beam reads the return annotation as the output
    # type and refuses one that is not iterable (`-> None` fails from 2.78 on).
    def process(self, element: Any, temp_dir: str,
                timestamp: Timestamp = beam.DoFn.TimestampParam,  # type: ignore[assignment]
                ) -> Iterable[Any]:
        if isinstance(element, tuple) and len(element) == 2:
            element = (element[0], _payload(element[1], element[0]))
        else:
            element = _payload(element, None)
        key, data, _ = split(element, timestamp, self._input_no, paths_by_component=True)
        if self._file is None:
            self._path = FileSystems.join(temp_dir, f"{uuid.uuid4().hex}.stage")
            self._file = FileSystems.create(self._path, mime_type="application/octet-stream",
                                            compression_type=CompressionTypes.UNCOMPRESSED)
        self._file.write(data)
        self._staged.append((key, self._at, len(data), zlib.crc32(data)))
        self._at += len(data)
        return ()

    def finish_bundle(self) -> Iterator[Any]:
        if self._file is None:
            return
        self._file.close()
        yield window.GlobalWindows.windowed_value((self._path, self._staged))
        self.start_bundle()


def _payload(run: Any, key: Any) -> bytes:
    if isinstance(run, (RunV2, bytes, bytearray, memoryview)):
        return run_bytes(run)
    what = f" (key {key!r})" if key is not None else ""
    raise TypeError(f"WriteToPack takes runs (RunV2 or run-file bytes) or (key, run) pairs, "
                    f"not {type(run).__name__}{what}")


def _plan(_: None, staged: List[Tuple[str, List[_Staged]]], prefix: str, suffix: str,
          num_shards: int, template: Optional[str]) -> Iterator[Tuple[str, List[_Planned]]]:
    runs = [(key, path, at, n, crc) for path, part in staged for key, at, n, crc in part]
    order = sort_keys([r[0] for r in runs], "WriteToPack")
    total = sum(r[3] for r in runs)
    shards = num_shards or max(1, -(-total // AUTO_SHARD_BYTES))
    count = len(runs)
    for k in range(shards):
        name = (prefix + suffix if template == "" and shards == 1
                else f"{prefix}-{k:05d}-of-{shards:05d}{suffix}")
        part = order[k * count // shards:(k + 1) * count // shards]
        yield name, [(label(runs[i][0]), *runs[i][1:]) for i in part]


class _WriteShardFn(beam.DoFn):
    """Writes one shard from its staged runs, in order."""

    def __init__(self, options: Dict[str, Any]) -> None:
        self._options = options

    def setup(self) -> None:
        self._records = counter("records_written")
        self._bytes = counter("bytes_written")

    def process(self, shard: Tuple[str, List[_Planned]]) -> Iterator[str]:
        name, runs = shard
        stages: Dict[str, IO[bytes]] = {}
        writer = PackWriter(name, expected_count=len(runs) or None, **self._options)
        try:
            for what, path, at, n, crc in runs:
                data = _read_staged(stages, path, at, n)
                if len(data) != n or zlib.crc32(data) != crc:
                    raise IOError(f"WriteToPack: {what}: its staged copy in {path} (offset {at}, "
                                  f"{n} bytes) does not read back as written")
                try:
                    writer.add(data)
                except Error as e:
                    raise ValueError(f"WriteToPack: {what}: {e}") from e
                self._records.inc()
                self._bytes.inc(n)
            writer.finish()
        finally:
            writer.close()  # abandons the pack unless finished
            for f in stages.values():
                f.close()
        yield name


def _read_staged(stages: Dict[str, IO[bytes]], path: str, at: int, n: int) -> bytes:
    f = stages.get(path)
    if f is None:
        if len(stages) >= _OPEN_STAGES:
            stages.pop(next(iter(stages))).close()
        f = stages[path] = FileSystems.open(path, mime_type="application/octet-stream",
                                            compression_type=CompressionTypes.UNCOMPRESSED)
    f.seek(at)
    return f.read(n)


def _finish(_: None, written: List[str], temp_dir: str) -> Iterator[str]:
    FileSystems.delete([temp_dir])
    yield from sorted(written)
