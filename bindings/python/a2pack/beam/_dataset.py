"""BuildDataset: runs in, a step dataset folder out (steps.npy +
metadata.db + manifest.json), the rows computed in parallel by the workers
and the folder assembled once.

The workers turn each run into its 32-byte rows (:mod:`a2pack.dataset_rows`,
the rule of the library's builder) and its metadata row, each with the run's
sort key (:mod:`._order`: its key, or the source position its read stamped
on it); one final step sorts the runs by that key, whatever order the runner
delivered them in, numbers them 0..n-1 and hands the rows to the
library (``a2pack_dataset_build_from_rows``), which writes the three files
with the code of ``a2pack dataset build``: the same bytes for the same runs
in the same order (with the same ``SOURCE_DATE_EPOCH``, which fixes the
manifest's time stamps; docs/beam.md).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Dict, Iterator, List, Tuple, Union

import apache_beam as beam
import numpy as np
import numpy.typing as npt
from apache_beam import pvalue, transforms
from apache_beam.transforms import display
from apache_beam.utils.timestamp import Timestamp

from ..dataset_rows import RowsError, RunMeta, run_rows, write_dataset
from ..errors import InvalidArgumentError
from ._common import counter
from ._order import SortKey, inputs, label, sort_keys, split

_LOG = logging.getLogger("a2pack.beam")

# What _RowsFn makes of a run: (sort key, metadata row, rows) for a good one,
# (sort key, None, why) for a bad one. One output for both, read as one side
# input: the bundle-based DirectRunner mixes up two side inputs taken from
# the outputs of one multi-output ParDo.
_Made = Tuple[SortKey, RunMeta, "npt.NDArray[np.void]"]
_Bad = Tuple[SortKey, None, str]


class BuildDataset(transforms.PTransform[pvalue.PCollection[Any], pvalue.PCollection[Dict[str, Any]]]):
    """Build the dataset folder ``out_dir`` from a PCollection of runs.

    Elements are ``(key, run)`` or a bare ``run``: a :class:`~a2pack.RunV2`,
    run-file bytes (v1 or v2) or a path to a run file. The runs become
    dataset runs in ascending ``key`` order (``ReadRunFiles`` keys by
    relative path and ``ReadFromPack(..., with_index=True)`` by entry index:
    the orders of ``a2pack dataset build`` for a folder and a pack); bare
    runs in the order of their source position, which ``ReadFromPack`` and
    ``ReadRunFiles`` stamp on each element as its Beam timestamp (then by a
    digest of their bytes, for runs without one). The order never depends
    on the runner, so the files do not either. Several inputs, as a tuple
    ``(a, b) | BuildDataset(...)``, follow one another in tuple order.

    A run that cannot be decoded or made into rows (no branch values without
    ``allow_missing_branches``, more than 65 536 steps, ...) is counted in
    ``bad_runs_skipped``, logged with its key, listed in the result, and left
    out, unless ``skip_bad=False``, which fails the pipeline on it.

    ``source_input`` and ``source_kind`` are what manifest.json records as the
    source (the CLI writes the --input it was given and "dir" or "pack");
    its time stamps are the assembly's time, or ``SOURCE_DATE_EPOCH`` when
    set on the worker that assembles.
    ``shard_rows`` > 0 writes the sharded layout (docs/dataset.md), the
    same shards as ``a2pack dataset build --shard-rows``.
    Runs that repeat each other (the same content digest: boards, moves
    and metadata, docs/dataset.md "Run digests") fail the pipeline with
    InvalidArgumentError naming them by key, writing nothing, unless
    ``allow_duplicates``.
    The output PCollection holds one dict: ``path``, ``runs``, ``rows``,
    ``runs_duplicated``, ``bad_runs`` (list of ``(key, message)``).
    """

    def __init__(self, out_dir: Union[str, os.PathLike[str]], *,
                 allow_missing_branches: bool = False, overwrite: bool = False,
                 skip_bad: bool = True, source_input: str = "beam",
                 source_kind: str = "beam", shard_rows: int = 0,
                 allow_duplicates: bool = False) -> None:
        self._out = os.fspath(out_dir)
        self._allow_duplicates = bool(allow_duplicates)
        self._shard_rows = int(shard_rows)
        self._allow_missing = allow_missing_branches
        self._overwrite = overwrite
        self._skip_bad = skip_bad
        self._source = (source_input, source_kind)

    def expand(self, pcoll: Any) -> pvalue.PCollection[Dict[str, Any]]:
        ins = inputs(pcoll, "BuildDataset")
        made = [pc | (f"Rows{i}" if i else "Rows") >> beam.ParDo(
            _RowsFn(self._allow_missing, self._skip_bad, i)) for i, pc in enumerate(ins)]
        all_made = tuple(made) | "FlattenRows" >> beam.Flatten() if len(made) > 1 else made[0]
        result: pvalue.PCollection[Dict[str, Any]] = (
            ins[0].pipeline
            | "Once" >> beam.Create([None])
            | "Assemble" >> beam.Map(_assemble, pvalue.AsList(all_made), self._out,
                                     self._overwrite, self._source, self._shard_rows,
                                     self._allow_duplicates))
        return result

    def display_data(self) -> Dict[str, Any]:
        return {
            "out_dir": display.DisplayDataItem(self._out, label="Dataset folder"),
            "allow_missing_branches": display.DisplayDataItem(self._allow_missing,
                                                              label="Allow missing branches"),
            "overwrite": display.DisplayDataItem(self._overwrite, label="Overwrite"),
            "skip_bad": display.DisplayDataItem(self._skip_bad, label="Skip bad runs"),
            "shard_rows": display.DisplayDataItem(self._shard_rows, label="Rows per shard"),
            "allow_duplicates": display.DisplayDataItem(self._allow_duplicates,
                                                        label="Allow duplicate runs"),
        }


class _RowsFn(beam.DoFn):
    def __init__(self, allow_missing: bool, skip_bad: bool, input_no: int) -> None:
        self._allow_missing = allow_missing
        self._skip_bad = skip_bad
        self._input_no = input_no

    def setup(self) -> None:
        self._bad = counter("bad_runs_skipped")
        self._runs = counter("runs_built")
        self._rows = counter("rows_built")

    # Beam fills `timestamp` in (its default is a marker object, not a Timestamp).
    def process(self, element: Any,
                timestamp: Timestamp = beam.DoFn.TimestampParam,  # type: ignore[assignment]
                ) -> Iterator[Union[_Made, _Bad]]:
        key, run, _ = split(element, timestamp, self._input_no)
        try:
            meta, rows = run_rows(run, allow_missing_branches=self._allow_missing,
                                  label=label(key))
        except RowsError as e:
            if not self._skip_bad:
                raise
            self._bad.inc()
            _LOG.warning("skipping run %s: %s", label(key), e)
            yield key, None, str(e)
            return
        self._runs.inc()
        self._rows.inc(len(rows))
        yield key, meta, rows


def _assemble(_: None, outcomes: List[Union[_Made, _Bad]], out_dir: str,
              overwrite: bool, source: Tuple[str, str], shard_rows: int = 0,
              allow_duplicates: bool = False) -> Dict[str, Any]:
    bad = [(label(k), why) for k, meta, why in outcomes if meta is None]
    made: List[_Made] = [m for m in outcomes if m[1] is not None]
    order = sort_keys([m[0] for m in made], "BuildDataset")
    made = [made[i] for i in order]
    if not made:
        raise ValueError(f"BuildDataset: no runs to build {out_dir} from"
                         + (f" ({len(bad)} bad runs skipped; the first: {min(bad)[1]})"
                            if bad else ""))
    try:
        result = write_dataset(out_dir, [(m[1], m[2]) for m in made], overwrite=overwrite,
                               source_input=source[0], source_kind=source[1],
                               shard_rows=shard_rows, allow_duplicates=allow_duplicates)
    except InvalidArgumentError as e:
        # A refusal names the runs by their place ("run 3"): name them by key.
        def key_of(m: "re.Match[str]") -> str:
            i = int(m.group(1))
            return label(made[i][0]) if i < len(made) else m.group(0)
        message = re.sub(r"\brun (\d+)\b", key_of, e.message)
        raise InvalidArgumentError(message, e.status) from None
    result["bad_runs"] = sorted(bad)
    return result
