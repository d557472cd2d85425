"""BuildDataset: runs in, a step dataset folder out (steps.npy +
metadata.db + manifest.json), the rows computed in parallel by the workers
and the folder assembled once.

The workers turn each run into its 32-byte rows (:mod:`a2pack.dataset_rows`,
the rule of the library's builder) and its metadata row; one final step sorts
the runs by their order key, numbers them 0..n-1 and hands the rows to the
library (``a2pack_dataset_build_from_rows``), which writes the three files
with the code of ``a2pack dataset build``: the same bytes for the same runs
in the same order (with the same ``SOURCE_DATE_EPOCH``, which fixes the
manifest's time stamps; docs/beam.md).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Iterator, List, Tuple, Union

import apache_beam as beam
import numpy as np
import numpy.typing as npt
from apache_beam import pvalue, transforms
from apache_beam.transforms import display

from ..dataset_rows import RowsError, RunMeta, run_rows, write_dataset
from ..run import RunV2
from ._common import counter

_LOG = logging.getLogger("a2pack.beam")
_BAD = "bad"

# What _RowsFn makes of a good run: (order key, metadata row, rows).
_Made = Tuple[Any, RunMeta, "npt.NDArray[np.void]"]


class BuildDataset(transforms.PTransform[pvalue.PCollection[Any], pvalue.PCollection[Dict[str, Any]]]):
    """Build the dataset folder ``out_dir`` from a PCollection of runs.

    Elements are ``(key, run)``: ``run`` a :class:`~a2pack.RunV2`, run-file
    bytes (v1 or v2) or a path to a run file; the runs become dataset runs in
    ascending ``key`` order (``ReadRunFiles`` keys by relative path and
    ``ReadFromPack(..., with_index=True)`` by entry index: the orders of
    ``a2pack dataset build`` for a folder and a pack). A bare run is keyed by
    its v2 bytes, which makes the order deterministic though arbitrary.

    A run that cannot be decoded or made into rows (no branch values without
    ``allow_missing_branches``, more than 65 536 steps, ...) is counted in
    ``bad_runs_skipped``, logged with its key, listed in the result, and left
    out, unless ``skip_bad=False``, which fails the pipeline on it.

    ``source_input`` and ``source_kind`` are what manifest.json records as the
    source (the CLI writes the --input it was given and "dir" or "pack");
    its time stamps are the assembly's time, or ``SOURCE_DATE_EPOCH`` when
    set on the worker that assembles.
    The output PCollection holds one dict: ``path``, ``runs``, ``rows``,
    ``bad_runs`` (list of ``(key, message)``).
    """

    def __init__(self, out_dir: Union[str, os.PathLike[str]], *,
                 allow_missing_branches: bool = False, overwrite: bool = False,
                 skip_bad: bool = True, source_input: str = "beam",
                 source_kind: str = "beam") -> None:
        self._out = os.fspath(out_dir)
        self._allow_missing = allow_missing_branches
        self._overwrite = overwrite
        self._skip_bad = skip_bad
        self._source = (source_input, source_kind)

    def expand(self, pcoll: pvalue.PCollection[Any]) -> pvalue.PCollection[Dict[str, Any]]:
        made = pcoll | "Rows" >> beam.ParDo(
            _RowsFn(self._allow_missing, self._skip_bad)).with_outputs(_BAD, main="rows")
        result: pvalue.PCollection[Dict[str, Any]] = (
            pcoll.pipeline
            | "Once" >> beam.Create([None])
            | "Assemble" >> beam.Map(_assemble, pvalue.AsList(made.rows),
                                     pvalue.AsList(made[_BAD]), self._out,
                                     self._overwrite, self._source))
        return result

    def display_data(self) -> Dict[str, Any]:
        return {
            "out_dir": display.DisplayDataItem(self._out, label="Dataset folder"),
            "allow_missing_branches": display.DisplayDataItem(self._allow_missing,
                                                              label="Allow missing branches"),
            "overwrite": display.DisplayDataItem(self._overwrite, label="Overwrite"),
            "skip_bad": display.DisplayDataItem(self._skip_bad, label="Skip bad runs"),
        }


def _label(key: object) -> str:
    if isinstance(key, bytes):
        return os.fsdecode(key) if len(key) < 4096 else f"<run of {len(key)} bytes>"
    return str(key)


class _RowsFn(beam.DoFn):
    def __init__(self, allow_missing: bool, skip_bad: bool) -> None:
        self._allow_missing = allow_missing
        self._skip_bad = skip_bad

    def setup(self) -> None:
        self._bad = counter("bad_runs_skipped")
        self._runs = counter("runs_built")
        self._rows = counter("rows_built")

    def process(self, element: Any) -> Iterator[Union[_Made, "pvalue.TaggedOutput[str, Tuple[str, str]]"]]:
        if isinstance(element, tuple) and len(element) == 2:
            key, run = element
        else:
            run = element
            key = run.to_bytes("v2") if isinstance(run, RunV2) else bytes(run)
        try:
            meta, rows = run_rows(run, allow_missing_branches=self._allow_missing,
                                  label=_label(key))
        except RowsError as e:
            if not self._skip_bad:
                raise
            self._bad.inc()
            _LOG.warning("skipping run %s: %s", _label(key), e)
            yield pvalue.TaggedOutput(_BAD, (_label(key), str(e)))
            return
        self._runs.inc()
        self._rows.inc(len(rows))
        yield key, meta, rows


def _assemble(_: None, made: List[_Made], bad: List[Tuple[str, str]], out_dir: str,
              overwrite: bool, source: Tuple[str, str]) -> Dict[str, Any]:
    made = sorted(made, key=lambda m: m[0])
    for a, b in zip(made, made[1:]):
        if a[0] == b[0]:
            raise ValueError(f"BuildDataset: two runs have the order key {_label(a[0])}")
    if not made:
        raise ValueError(f"BuildDataset: no runs to build {out_dir} from"
                         + (f" ({len(bad)} bad runs skipped; the first: {min(bad)[1]})"
                            if bad else ""))
    result = write_dataset(out_dir, [(m[1], m[2]) for m in made], overwrite=overwrite,
                           source_input=source[0], source_kind=source[1])
    result["bad_runs"] = sorted(bad)
    return result
