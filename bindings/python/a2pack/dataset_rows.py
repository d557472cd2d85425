"""Dataset rows in Python: one run's 32-byte rows, and a dataset folder
written from rows computed elsewhere (a2pack.beam's BuildDataset computes
them on Beam workers and assembles the folder here).

`run_rows` restates the library's row rule (src/dataset/row.hpp) with numpy,
so that any Python worker can compute rows without a dataset in sight; the
library checks the rows' run_id / step_index structure when it writes them.
`write_dataset` hands the rows to the library
(``a2pack_dataset_build_from_rows``), which writes steps.npy, metadata.db and
manifest.json with the code of ``a2pack dataset build``: tests/python/
test_beam.py checks the three files byte for byte against the CLI.
"""

# No `from __future__ import annotations` here: RunMeta's field annotations
# must be real objects, because the NamedTuple's generated __new__ does not
# live in this module and a string annotation there cannot be resolved (pdoc).
import os
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from ._native import check, ffi, fspath, lib
from .dataset import STEP_DTYPE, _note_callback
from .errors import Error
from .run import RunV2

MAX_RUN_STEPS = 65536  # step_index is a u16
_INT64_MAX = (1 << 63) - 1


class RowsError(ValueError):
    """A run that cannot become dataset rows; the message names it."""


class RunMeta(NamedTuple):
    num_steps: int
    max_score: int
    highest_tile: int
    engine: Optional[str]
    start_time: int
    elapsed_s: float


RunLike = Union[RunV2, bytes, bytearray, memoryview, str, os.PathLike[str]]


def _as_run(run: RunLike, label: str) -> RunV2:
    try:
        if isinstance(run, RunV2):
            return run
        if isinstance(run, (bytes, bytearray, memoryview)):
            return RunV2.from_bytes(bytes(run))
        return RunV2.load(run)
    except Error as e:
        raise RowsError(f"{label}: {e}") from e


def run_rows(run: RunLike, *, allow_missing_branches: bool = False, run_id: int = 0,
             label: str = "run") -> Tuple[RunMeta, "npt.NDArray[np.void]"]:
    """(metadata row, steps rows) of one run, rows in :data:`STEP_DTYPE`
    with ``run_id``. Raises :class:`RowsError` naming ``label``."""
    r = _as_run(run, label)
    n = len(r)
    if n > MAX_RUN_STEPS:
        raise RowsError(f"{label}: {n} steps; a dataset row's step_index is a u16, so a run may "
                        f"have at most {MAX_RUN_STEPS} steps")
    moves = r.moves
    present = r.branch_present.astype(bool)
    if not allow_missing_branches and not present.all():
        s = int(np.argmin(present))
        raise RowsError(f"{label}: step {s} has no branch values (the run was recorded without "
                        "them), so its ev_legal/ev_values are unknown; pass "
                        "allow_missing_branches to mark only the chosen move legal, at 1.0")
    m = r.meta
    for what, value in (("max_score", m.max_score), ("start_unix_s", m.start_unix_s)):
        if value > _INT64_MAX:
            raise RowsError(f"{label}: {what} {value} does not fit SQLite's 64-bit INTEGER")
    # The row rule (row.hpp make_row): with branches, the legal moves' values
    # clamped to [0, 1] (NaN -> 0), the chosen move exactly 1.0 when legal,
    # illegal moves 0; without, only the chosen move, legal, at 1.0.
    mask = np.where(present, r.legal_masks & 0xF, np.left_shift(1, moves & 3)).astype(np.uint8)
    bit = ((mask[:, None] >> np.arange(4, dtype=np.uint8)) & 1).astype(bool)
    v = r.branch_values.astype(np.float32, copy=False)
    with np.errstate(invalid="ignore"):
        clamped = np.where(v > 0, np.where(v < 1, v, np.float32(1)), np.float32(0))
    chosen = moves[:, None].astype(np.int64) == np.arange(4)[None, :]
    ev = np.where(bit, np.where(chosen, np.float32(1), clamped), np.float32(0))
    rows = np.zeros(n, STEP_DTYPE)
    rows["board"] = r.boards
    rows["move"] = moves
    rows["ev_legal"] = mask
    rows["ev_values"] = ev.astype(np.float32)
    rows["run_id"] = run_id
    rows["step_index"] = np.arange(n, dtype=np.uint16) if n else 0
    meta = RunMeta(n, int(m.max_score), int(m.highest_tile), m.engine_str,
                   int(m.start_unix_s), float(m.elapsed_s))
    return meta, rows


# ------------------------------------------------------------------ folder
def write_dataset(out_dir: "Union[str, os.PathLike[str]]",
                  runs: "Sequence[Tuple[RunMeta, npt.NDArray[np.void]]]", *,
                  overwrite: bool = False, source_input: str = "python",
                  source_kind: str = "python",
                  lock_timeout: Optional[float] = 60.0, shard_rows: int = 0,
                  allow_duplicates: bool = False) -> Dict[str, Any]:
    """Write a dataset folder from ``runs`` (metadata row, rows), which get
    run ids 0..n-1 in the order given (the rows' run_id column is set here).

    The folder is written by the library (``a2pack_dataset_build_from_rows``),
    the code ``a2pack dataset build`` writes with, so the three files are the
    CLI's bytes for the same runs in the same order (the manifest's time
    stamps too when ``SOURCE_DATE_EPOCH`` is set). Written under a temporary
    sibling name and renamed into place: on an error nothing is left under
    ``out_dir``. ``shard_rows`` > 0 writes the sharded layout, as
    ``a2pack dataset build --shard-rows`` does. Returns path, runs, rows and
    ``notes`` (leftover folders of builds that died, removed or left alone,
    as :func:`a2pack.build_dataset` reports them). Runs that repeat each
    other (the same content digest) raise InvalidArgumentError naming them,
    writing nothing, unless ``allow_duplicates``."""
    out = os.fspath(out_dir)
    n = len(runs)
    counts = np.fromiter((len(rows) for _m, rows in runs), dtype=np.int64, count=n)
    for i, (m, _rows) in enumerate(runs):
        if m.num_steps != counts[i]:
            raise ValueError(f"run {i}: metadata says {m.num_steps} steps, "
                             f"but it has {counts[i]} rows")
    all_rows = (np.concatenate([np.ascontiguousarray(rows, dtype=STEP_DTYPE)
                                for _m, rows in runs]) if n else np.zeros(0, STEP_DTYPE))
    all_rows["run_id"] = np.repeat(np.arange(n, dtype=np.uint32), counts)
    recs = ffi.new("a2pack_dataset_run_record[]", max(n, 1))
    keep: List[Any] = []  # the engine strings, alive for the call
    for i, (m, _rows) in enumerate(runs):
        r = recs[i]
        r.num_steps = m.num_steps
        r.max_score = m.max_score
        r.highest_tile = m.highest_tile
        r.start_time = m.start_time
        r.elapsed_s = float(m.elapsed_s)
        if m.engine is not None:
            keep.append(ffi.new("char[]", m.engine.encode("utf-8")))
            r.engine = keep[-1]
    o = ffi.new("a2pack_dataset_rows_options *")
    lib.a2pack_dataset_rows_options_init(o)
    o.overwrite = int(bool(overwrite))
    o.shard_rows = int(shard_rows)
    o.allow_duplicates = int(bool(allow_duplicates))
    o.lock_timeout_ms = (-1 if lock_timeout is None or lock_timeout < 0
                         else int(lock_timeout * 1000))
    src_in = ffi.new("char[]", source_input.encode("utf-8"))
    src_kind = ffi.new("char[]", source_kind.encode("utf-8"))
    o.source_input, o.source_kind = src_in, src_kind
    notes: List[str] = []
    on_note = _note_callback(notes)
    o.on_note = on_note
    res = ffi.new("a2pack_dataset_build_result *")
    res.size = ffi.sizeof("a2pack_dataset_build_result")
    check(lib.a2pack_dataset_build_from_rows(fspath(out), ffi.from_buffer(all_rows), len(all_rows),
                                             recs, n, o, res))
    return {"path": os.fsdecode(out).rstrip("/") or "/", "runs": int(res.total_runs),
            "rows": int(res.total_rows), "runs_duplicated": int(res.runs_duplicated),
            "notes": notes}
