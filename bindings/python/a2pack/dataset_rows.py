"""Dataset rows in Python: one run's 32-byte rows, and a dataset folder
written from rows computed elsewhere (a2pack.beam's BuildDataset computes
them on Beam workers and assembles the folder here).

The C API builds a dataset only from a folder or a packfile and computes the
rows itself; it has no entry point that takes rows. So this module restates
the builder's rules (src/dataset/row.hpp, builder.cpp, metadata.cpp,
manifest.cpp, docs/dataset.md "Exact bytes") with numpy, sqlite3 and json,
and tests/python/test_beam.py checks its output byte for byte against
`a2pack dataset build`.
"""

# No `from __future__ import annotations` here: RunMeta's field annotations
# must be real objects, because the NamedTuple's generated __new__ does not
# live in this module and a string annotation there cannot be resolved (pdoc).
import json
import os
import shutil
import sqlite3
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from ._native import __version__
from .dataset import STEP_DTYPE
from .errors import Error
from .run import RunV2

MAX_RUN_STEPS = 65536  # step_index is a u16
_INT64_MAX = (1 << 63) - 1
_FORMAT_VERSION = 1
# The dtype text of manifest.json ("dtype"), as the library writes it.
_DTYPE_TEXT = ("[('board', '<u8'), ('move', '|u1'), ('ev_legal', '|u1'), ('ev_values', '<f4', "
               "(4,)), ('run_id', '<u4'), ('step_index', '<u2')]")
# metadata.db's schema, statement for statement as the library creates it:
# SQLite stores the CREATE text, so it must match character for character.
_SCHEMA = (
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, first_step_idx INTEGER NOT NULL, "
    "num_steps INTEGER NOT NULL, max_score INTEGER NOT NULL, highest_tile INTEGER NOT NULL, "
    "engine TEXT, start_time INTEGER, elapsed_s REAL)",
    "CREATE INDEX idx_runs_score ON runs(max_score)",
    "CREATE INDEX idx_runs_len ON runs(num_steps)",
    "CREATE INDEX idx_runs_engine ON runs(engine)",
)
_INSERT = ("INSERT INTO runs (id, first_step_idx, num_steps, max_score, highest_tile, engine, "
           "start_time, elapsed_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")


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
def _npy_header(rows: int) -> bytes:
    """What np.save writes before the rows (docs/dataset.md: 256 bytes)."""
    import io
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": np.lib.format.dtype_to_descr(STEP_DTYPE), "fortran_order": False,
              "shape": (rows,)})
    return buf.getvalue()


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _crc32c_extend() -> Callable[[int, bytes], int]:
    """google_crc32c.extend(crc, data), imported on first use (optional dependency)."""
    try:
        import google_crc32c
    except ImportError as e:
        raise ImportError("writing a dataset from Python needs google-crc32c: "
                          "`pip install google-crc32c` (part of a2pack[beam])") from e
    extend: Callable[[int, bytes], int] = google_crc32c.extend
    return extend


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_target(out: str, overwrite: bool) -> bool:
    if not os.path.lexists(out):
        return False
    if not os.path.isdir(out) or os.path.islink(out):
        raise ValueError(f"{out}: exists and is not a folder")
    if not overwrite:
        raise ValueError(f"{out}: already exists; pass overwrite=True to replace it")
    names = os.listdir(out)
    if names and "steps.npy" not in names and "manifest.json" not in names:
        raise ValueError(f"{out}: exists and does not look like a dataset (no steps.npy); "
                         "refusing to replace it")
    return True


def write_dataset(out_dir: "Union[str, os.PathLike[str]]",
                  runs: "Sequence[Tuple[RunMeta, npt.NDArray[np.void]]]", *,
                  overwrite: bool = False, source_input: str = "python",
                  source_kind: str = "python") -> Dict[str, Any]:
    """Write a dataset folder from ``runs`` (metadata row, rows), which get
    run ids 0..n-1 in the order given (the rows' run_id column is set here).
    Written under a temporary sibling name and renamed into place: on an
    error nothing is left under ``out_dir``. Returns path, runs and rows."""
    out = os.fspath(out_dir).rstrip("/") or "/"
    exists = _check_target(out, overwrite)
    crc32c_extend = _crc32c_extend()
    tmp = f"{out}.tmp-py-{os.getpid()}-{time.monotonic_ns()}"
    os.mkdir(tmp)
    try:
        total = sum(len(rows) for _m, rows in runs)
        crc = 0
        with open(os.path.join(tmp, "steps.npy"), "wb") as f:
            f.write(_npy_header(total))
            for rid, (_m, rows) in enumerate(runs):
                rows = np.ascontiguousarray(rows, dtype=STEP_DTYPE).copy()
                rows["run_id"] = rid
                data = rows.tobytes()
                crc = crc32c_extend(crc, data)
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        db = sqlite3.connect(os.path.join(tmp, "metadata.db"), isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=DELETE")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("BEGIN")
            for stmt in _SCHEMA:
                db.execute(stmt)
            first = 0
            params: List[Tuple[int, int, int, int, int, Optional[str], int, float]] = []
            for rid, (m, _rows) in enumerate(runs):
                params.append((rid, first, m.num_steps, m.max_score, m.highest_tile, m.engine,
                               m.start_time, float(m.elapsed_s)))
                first += m.num_steps
            db.executemany(_INSERT, params)
            db.execute("COMMIT")
        finally:
            db.close()
        now = _utc_now()
        manifest = {
            "format": "a2pack-steps", "format_version": _FORMAT_VERSION,
            "rows": total, "runs": len(runs), "next_run_id": len(runs),
            "steps_crc32c": crc, "row_bytes": 32, "dtype": _DTYPE_TEXT,
            "created": now, "updated": now, "generator": f"a2pack {__version__}",
            "sources": [{"input": source_input, "kind": source_kind, "runs": len(runs),
                         "rows": total, "first_run_id": 0, "added": now}],
        }
        # The library's JSON writer orders keys by name and indents by two.
        text = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        if exists:
            old = f"{out}.old-py-{os.getpid()}-{time.monotonic_ns()}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
        _fsync_dir(os.path.dirname(os.path.abspath(out)))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"path": out, "runs": len(runs), "rows": total}
