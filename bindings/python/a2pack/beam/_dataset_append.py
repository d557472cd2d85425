"""AppendToDataset: runs in, appended to an existing step dataset.

The workers turn each element into run-file bytes with its sort key (the
order of :class:`BuildDataset`, :mod:`._order`); one final step writes the
runs in that order into a folder beside the dataset and appends the folder
with the library's append (``a2pack_dataset_append``): atomic, the new rows
only - steps.npy extended in place, or new shards of a sharded dataset - and
the same run ids and bytes as ``a2pack dataset append`` of the same runs in
the same order. The folder is removed afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import apache_beam as beam
from apache_beam import pvalue, transforms
from apache_beam.utils.timestamp import Timestamp

from ..dataset import append_dataset
from ..errors import InvalidArgumentError
from ._common import counter
from ._order import SortKey, inputs, label, run_bytes, sort_keys, split


class AppendToDataset(transforms.PTransform[pvalue.PCollection[Any], pvalue.PCollection[Dict[str, Any]]]):
    """Append a PCollection of runs to the dataset folder ``dataset_dir``.

    Elements as for :class:`BuildDataset` (``(key, run)`` or a bare run: a
    :class:`~a2pack.RunV2`, run-file bytes or a path); the runs get the next
    run ids in the same runner-independent order. ``skip_bad`` skips runs
    the library cannot read or decode (listed in the result's ``bad_runs``);
    ``shard_rows`` sizes the new shards of a sharded dataset (0: its own).
    ``lock_timeout`` (seconds, None: no limit) waits for readers that are
    loading the dataset. Runs the dataset already holds, or that repeat
    each other, fail the pipeline (InvalidArgumentError naming them by key,
    nothing appended) unless ``allow_duplicates``. The output PCollection
    holds one dict: the append's counts (``runs_added``, ``rows_added``,
    ``total_runs``, ``total_rows``, ``steps_copied``, ``runs_duplicated``)
    and ``bad_runs``.
    """

    def __init__(self, dataset_dir: Union[str, os.PathLike[str]], *,
                 allow_missing_branches: bool = False, skip_bad: bool = True,
                 shard_rows: int = 0, lock_timeout: Optional[float] = 60.0,
                 allow_duplicates: bool = False) -> None:
        self._dir = os.fspath(dataset_dir)
        self._opts = dict(allow_missing_branches=allow_missing_branches, skip_bad=skip_bad,
                          shard_rows=int(shard_rows), lock_timeout=lock_timeout,
                          allow_duplicates=bool(allow_duplicates))

    def expand(self, pcoll: Any) -> pvalue.PCollection[Dict[str, Any]]:
        ins = inputs(pcoll, "AppendToDataset")
        made = [pc | (f"Bytes{i}" if i else "Bytes") >> beam.ParDo(_BytesFn(i))
                for i, pc in enumerate(ins)]
        all_made = tuple(made) | "FlattenBytes" >> beam.Flatten() if len(made) > 1 else made[0]
        result: pvalue.PCollection[Dict[str, Any]] = (
            ins[0].pipeline
            | "Once" >> beam.Create([None])
            | "Append" >> beam.Map(_append, pvalue.AsList(all_made), self._dir, self._opts))
        return result


class _BytesFn(beam.DoFn):
    def __init__(self, input_no: int) -> None:
        self._input_no = input_no

    def setup(self) -> None:
        self._runs = counter("runs_appended")

    def process(self, element: Any,
                timestamp: Timestamp = beam.DoFn.TimestampParam,  # type: ignore[assignment]
                ) -> Iterator[Tuple[SortKey, bytes]]:
        key, run, _ = split(element, timestamp, self._input_no)
        if isinstance(run, (str, os.PathLike)):
            with open(run, "rb") as f:
                data = f.read()
        else:
            data = run_bytes(run)
        self._runs.inc()
        yield key, data


def _append(_: None, made: List[Tuple[SortKey, bytes]], dataset_dir: str,
            opts: Dict[str, Any]) -> Dict[str, Any]:
    order = sort_keys([m[0] for m in made], "AppendToDataset")
    if not order:
        raise ValueError(f"AppendToDataset: no runs to append to {dataset_dir}")
    parent = os.path.dirname(os.path.abspath(dataset_dir))
    folder = tempfile.mkdtemp(prefix=os.path.basename(os.path.abspath(dataset_dir)) + ".beam-append-",
                              dir=parent)
    try:
        names: Dict[str, SortKey] = {}
        for pos, i in enumerate(order):
            name = f"run-{pos:09d}.a2run2"  # the byte order of the names is the runs' order
            names[name] = made[i][0]
            with open(os.path.join(folder, name), "wb") as f:
                f.write(made[i][1])
        try:
            result = append_dataset(dataset_dir, folder, **opts)
        except InvalidArgumentError as e:
            # The runs a refusal names are files of the temporary folder:
            # name them by their keys instead.
            def key_of(m: "re.Match[str]") -> str:
                key = names.get(m.group(1))
                return label(key) if key is not None else m.group(0)
            message = re.sub(re.escape(folder) + r"/(run-\d{9}\.a2run2)", key_of, e.message)
            raise InvalidArgumentError(message, e.status) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    skipped = result.pop("skipped", [])
    result["bad_runs"] = sorted((label(names[os.path.basename(path)]) if
                                 os.path.basename(path) in names else path, why)
                                for path, why in skipped)
    result["path"] = dataset_dir
    return result
