"""a2pack on Ray: Ray Data sources and sinks, Ray Train helpers.

::

    import ray
    import a2pack.ray as a2ray

    runs = a2ray.read_runs("runs/")                  # one row per run file
    a2ray.write_pack(runs, "runs.a2pack")            # the bytes of `a2pack pack -i runs/`
    a2ray.write_dataset(runs, "ds/", source_input="runs/", source_kind="dir")
    steps = a2ray.read_dataset("ds/", columns=["exponents", "move"])
    steps.iter_batches(batch_size=4096)

Sources (``ray.data.Datasource`` subclasses, and ``read_*`` functions whose
other keyword arguments - ``override_num_blocks``, ``num_cpus``,
``concurrency``, ``runtime_env``, ... - go to ``ray.data.read_datasource``):

- :func:`read_runs` - ``.a2run2`` files (a folder, a glob or a list), one row
  per run;
- :func:`read_pack` - packfiles, one row per entry;
- :func:`read_bag` - record files (``.bag``/``.bagz``, ``name@N.bagz``,
  ``name@*.bagz``, comma lists, glob patterns), one row per record;
- :func:`read_dataset` - a step dataset (single file or sharded), one row
  per step, in blocks of whole runs, only the columns asked for;
- :func:`read_log` - data-logger folders, one row per record.

Run rows (``read_runs``, ``read_pack``) have the columns of :data:`RUN_COLUMNS`:
``key`` (the run's order key), ``index``, ``source``, ``run`` (the run file's
bytes), the run's meta and its steps as list columns (``boards``, ``moves``,
...). The sinks take such rows:

- :func:`write_pack` / :func:`write_bag` / :func:`write_dataset` write the
  runs in the order of their keys, whatever the number of blocks and
  workers, so the files are the CLI's (``a2pack pack``, ``bag convert``,
  ``dataset build``) for the same runs; each output appears only complete;
- :func:`append_dataset` appends them as ``a2pack dataset append`` does.

Ray Train: :func:`train_feed` opens an :class:`a2pack.Feed` with the
worker's world rank and size and the feed state of the run's latest
checkpoint; :func:`report_feed` reports metrics with a checkpoint holding
the feed state. The state does not depend on the number of workers, so a run
resumes on any number of them.

Importing this module needs Ray (``pip install 'a2pack[ray]'``);
``import a2pack`` never imports it. See docs/ray.md.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import json
import logging
import os
import posixpath
import shutil
import sqlite3
import tempfile
import uuid
import zlib
from typing import (IO, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)

import numpy as np
import numpy.typing as npt

try:
    import ray
    import ray.data
    import ray.train
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasink, Datasource, ReadTask
except ImportError as e:  # pragma: no cover - exercised by the import test
    raise ImportError(
        "a2pack.ray needs Ray, which is not installed: `pip install 'a2pack[ray]'` "
        "(or `pip install 'ray[data,train]'`); the rest of a2pack works without it") from e

try:
    import pyarrow as pa
except ImportError as e:  # pragma: no cover - Ray Data itself needs pyarrow
    raise ImportError("a2pack.ray needs pyarrow (Ray Data installs it)") from e

from . import bag as _bag
from .arrow import bag_batch_arrow, dataset_gather_arrow, run_batch_arrow
from .dataset import STEP_DTYPE, Dataset, append_runs as _append_runs, verify_dataset
from .dataset_rows import RowsError, RunMeta, run_rows, write_dataset as _write_rows
from .errors import Error
from .feed import Feed
from .logger import LogData, decode as _decode_log
from .pack import PackReader, PackWriter
from .run import Meta, RunBatch, RunV2, decode_batch

__all__ = [
    "RUN_COLUMNS", "STEP_COLUMNS", "RunsDatasource", "PackDatasource", "BagDatasource",
    "StepDatasetDatasource", "LogDatasource", "read_runs", "read_pack", "read_bag",
    "read_dataset", "read_log", "PackDatasink", "BagDatasink", "DatasetDatasink",
    "AppendDatasink", "write_pack", "write_bag", "write_dataset", "append_dataset", "runs_table",
    "train_feed", "report_feed", "feed_state", "FEED_STATE_FILE",
]

_LOG = logging.getLogger("a2pack.ray")
PathLike = Union[str, "os.PathLike[str]"]
Paths = Union[PathLike, Sequence[PathLike]]

#: Columns of a run row, in order (``run``: the run file's bytes).
RUN_COLUMNS = ("key", "index", "source", "run", "num_steps", "final_board", "max_score",
               "highest_tile", "start_unix_s", "elapsed_s", "source_kind", "engine",
               "boards", "exponents", "moves", "legal_masks", "branch_values", "branch_present")
#: Columns of a step row (:func:`read_dataset`), as the library exports them.
STEP_COLUMNS = ("board", "exponents", "move", "legal_mask", "ev_values", "run_id", "step_index")

# The run meta columns of the library's runs layout, and its steps-layout
# names for the list columns of a run row.
_META = ("num_steps", "final_board", "max_score", "highest_tile", "start_unix_s", "elapsed_s",
         "source_kind", "engine")
_STEP_LISTS = {"boards": "board", "exponents": "exponents", "moves": "move",
               "legal_masks": "legal_mask", "branch_values": "ev_values",
               "branch_present": "has_ev"}
_RUNS_PER_BLOCK = 1024        # runs decoded per library call (and per block)
_RECORDS_PER_BLOCK = 4096     # records per block of a bag read
_BLOCK_BYTES = 64 << 20       # at most about this much per block
_ROWS_PER_STEP_BLOCK = 1 << 16


# ------------------------------------------------------------------ paths
def _url(path: str) -> str:
    """``s3://``/``gs://`` URLs in their plain form (the library also takes
    pathlib's spellings ``/s3://b/k`` and ``s3:/b/k``)."""
    for scheme in ("s3", "gs"):
        for form in (f"/{scheme}://", f"{scheme}:/", f"/{scheme}:/"):
            if path.startswith(form) and not path.startswith(f"{scheme}://"):
                return f"{scheme}://" + path[len(form):].lstrip("/")
    return path


def _remote(path: str) -> bool:
    return _url(path).startswith(("s3://", "gs://"))


def _has_magic(path: str) -> bool:
    return glob.has_magic(path)


_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION",
        "AWS_NO_SIGN_REQUEST", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "STORAGE_EMULATOR_HOST",
        "A2PACK_GCS_ENDPOINT", "GOOGLE_APPLICATION_CREDENTIALS")


def _filesystem(url: str) -> Tuple[Any, str]:
    """(pyarrow filesystem, path inside it) for an ``s3://``/``gs://`` URL,
    with the endpoint and credentials the library uses (docs/storage.md):
    run files have no reader of their own in the library, so their bytes
    (and listings of buckets) come through pyarrow. One filesystem per
    scheme and environment, made once per process."""
    scheme, rest = _url(url).split("://", 1)
    return _make_filesystem(scheme, tuple(os.environ.get(k) for k in _ENV)), rest


@functools.lru_cache(maxsize=8)
def _make_filesystem(scheme: str, _env: Tuple[Optional[str], ...]) -> Any:
    import pyarrow.fs as pafs

    if scheme == "s3":
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        kw: Dict[str, Any] = {}
        if endpoint:
            kw["endpoint_override"] = endpoint.split("://", 1)[-1]
            kw["scheme"] = endpoint.split("://", 1)[0] if "://" in endpoint else "https"
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            kw["region"] = region
        if os.environ.get("AWS_NO_SIGN_REQUEST", "").lower() == "true":
            kw["anonymous"] = True
        return pafs.S3FileSystem(**kw)
    emulator = os.environ.get("STORAGE_EMULATOR_HOST") or os.environ.get("A2PACK_GCS_ENDPOINT")
    if emulator:
        target = emulator.split("://", 1)[-1].rstrip("/")
        return pafs.GcsFileSystem(endpoint_override=target, scheme=(
            emulator.split("://", 1)[0] if "://" in emulator else "http"), anonymous=True)
    return pafs.GcsFileSystem()


def _remote_list(url: str, recursive: bool) -> List[Tuple[str, int]]:
    """(URL, size) of every object under the folder ``url``."""
    import pyarrow.fs as pafs

    fs, path = _filesystem(url)
    scheme = _url(url).split("://", 1)[0]
    infos = fs.get_file_info(pafs.FileSelector(path.rstrip("/"), recursive=recursive,
                                               allow_not_found=True))
    return sorted((f"{scheme}://{i.path}", int(i.size)) for i in infos
                  if i.type == pafs.FileType.File)


def _glob(pattern: str, what: str) -> List[Tuple[str, int]]:
    """(path, size) of the files matching ``pattern`` (local or remote), in
    byte order of their paths; FileNotFoundError naming the pattern if none."""
    if _remote(pattern):
        url = _url(pattern)
        scheme, rest = url.split("://", 1)
        parts = rest.split("/")
        fixed = next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts))
        base = f"{scheme}://" + "/".join(parts[:fixed])
        found = [(u, n) for u, n in _remote_list(base, recursive=fixed < len(parts) - 1)
                 if fnmatch.fnmatchcase(u, url)]
    else:
        found = [(p, os.path.getsize(p)) for p in glob.glob(pattern) if os.path.isfile(p)]
    if not found:
        raise FileNotFoundError(f"{pattern}: no {what} matches this pattern")
    return sorted(found, key=lambda f: os.fsencode(f[0]))


def _size(path: str) -> int:
    if _remote(path):
        fs, p = _filesystem(path)
        import pyarrow.fs as pafs
        info = fs.get_file_info(p)
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(f"{path}: no such object")
        return int(info.size)
    return os.path.getsize(path)


def _read_bytes(path: str) -> bytes:
    if _remote(path):
        fs, p = _filesystem(path)
        with fs.open_input_stream(p, compression=None) as f:  # the bytes as stored
            data: bytes = f.read()
        return data
    with open(path, "rb") as fh:
        return fh.read()


def _split_even(n: int, parts: int) -> List[Tuple[int, int]]:
    """[a, b) ranges cutting 0..n into ``parts`` nearly equal pieces (no empty one)."""
    parts = max(1, min(int(parts), n))
    return [(k * n // parts, (k + 1) * n // parts) for k in range(parts) if n]


def _metadata(rows: Optional[int], size: Optional[int], files: Sequence[str]) -> BlockMetadata:
    return BlockMetadata(num_rows=rows, size_bytes=None if size is None else int(size),
                         input_files=list(files), exec_stats=None)


# ------------------------------------------------------------------ run rows
_UNDECODED = ("key", "index", "source", "run")  # run columns that need no decoding


def _needs_decoding(columns: Optional[Sequence[str]]) -> bool:
    return columns is None or any(c not in _UNDECODED for c in columns)


def _run_rows_table(batch: Optional[RunBatch], keys: pa.Array, index: npt.NDArray[np.int64],
                    sources: Sequence[str], payloads: Optional[Sequence[bytes]],
                    columns: Optional[Sequence[str]]) -> pa.Table:
    """A table of run rows: the meta columns and the step columns of the
    library's Arrow exports of the decoded ``batch`` (zero-copy views of it
    but ``exponents``, which the export computes), the step columns as
    lists cut at each run's first step. ``batch`` may be None when
    ``columns`` asks only for what needs no decoding."""
    want = list(RUN_COLUMNS if columns is None else columns)
    out: Dict[str, pa.Array] = {}
    if "key" in want:
        out["key"] = keys
    if "index" in want:
        out["index"] = pa.array(index, pa.int64())
    if "source" in want:
        out["source"] = pa.array(list(sources), pa.string())
    if "run" in want:
        if payloads is None:
            raise ValueError("the run column needs the runs' bytes")
        out["run"] = pa.array(list(payloads), pa.large_binary())
    if batch is not None:
        runs = pa.record_batch(run_batch_arrow(batch, "runs"))
        for name in _META:
            if name in want:
                out[name] = runs.column(name)
        lists = [c for c in _STEP_LISTS if c in want]
        if lists:
            steps = pa.record_batch(run_batch_arrow(batch, "steps"))
            first = np.asarray(runs.column("first_step").to_numpy(zero_copy_only=False),
                               np.int64)
            offsets = pa.array(np.append(first, np.int64(steps.num_rows)), pa.int64())
            for name in lists:
                out[name] = pa.LargeListArray.from_arrays(offsets,
                                                          steps.column(_STEP_LISTS[name]))
    missing = [c for c in want if c not in out]
    if missing:
        raise ValueError(f"the columns {missing} need the runs decoded")
    return pa.table({c: out[c] for c in want})


@functools.lru_cache(maxsize=None)
def _run_schema(key_type: str) -> pa.Schema:
    """The schema of run rows (keys of ``key_type``), from a one-step run
    through the same code as every block: what the read tasks announce, so
    that Ray knows the columns without reading (and the sinks can select
    theirs, which spares the reads the decoding)."""
    meta = Meta(steps=1, start_unix_s=0, elapsed_s=0.0, max_score=0, highest_tile=0,
                engine_str="x")
    data = RunV2.from_arrays(meta, np.zeros(1, np.uint64), np.zeros(1, np.uint8),
                             np.zeros((1, 4), np.float32), np.ones(1, np.uint8),
                             final_board=0).to_bytes("v2")
    keys = pa.array([0], pa.int64()) if key_type == "int64" else pa.array([""], pa.string())
    table = _run_rows_table(decode_batch([data]), keys, np.zeros(1, np.int64), [""], [data],
                            None)
    return table.schema


def _select(schema: pa.Schema, columns: Optional[Sequence[str]]) -> pa.Schema:
    return schema if columns is None else pa.schema([schema.field(c) for c in columns])


def _check_columns(columns: Optional[Sequence[str]], known: Sequence[str], what: str
                   ) -> Optional[List[str]]:
    if columns is None:
        return None
    cols = [str(c) for c in columns]
    bad = [c for c in cols if c not in known]
    if bad:
        raise ValueError(f"{what}: no column {', '.join(map(repr, bad))}; the columns are "
                         f"{', '.join(known)}")
    return cols


class _A2Datasource(Datasource):  # type: ignore[misc]  # Ray's classes are Any to mypy
    """What the a2pack sources share: column projection (Ray pushes
    ``select_columns`` down into the read) and the name Ray shows."""

    _known: Tuple[str, ...] = ()

    def __init__(self, columns: Optional[Sequence[str]]) -> None:
        super().__init__()
        cols = _check_columns(columns, self._known, type(self).__name__)
        self._projection_map: Optional[Dict[str, str]] = (
            None if cols is None else {c: c for c in cols})

    def supports_projection_pushdown(self) -> bool:
        return True

    def _columns(self) -> Optional[List[str]]:
        pm = self._projection_map
        if pm is None:
            return None
        return [c for c in self._known if c in pm]


# ------------------------------------------------------------------ read_runs
def _list_runs(paths: Paths) -> Tuple[List[str], List[str], List[int]]:
    """(paths, keys, sizes) of the run files ``paths`` names, in order: a
    folder's every ``*.a2run2`` (recursively) in byte order of the relative
    paths (the order of ``a2pack dataset build``) with the relative path as
    key; a glob's matches in byte order, keyed by path; a list as given."""
    if isinstance(paths, (str, os.PathLike)):
        p = os.fspath(paths)
        if _has_magic(p):
            found = _glob(p, ".a2run2 file")
            return [f for f, _ in found], [f for f, _ in found], [n for _, n in found]
        if _remote(p) and not p.endswith(".a2run2"):
            root = _url(p).rstrip("/")
            found = [(u, n) for u, n in _remote_list(root, recursive=True)
                     if u.endswith(".a2run2") and posixpath.basename(u) != ".a2run2"]
            if not found:
                raise FileNotFoundError(f"{p}: no .a2run2 files under it")
            found.sort(key=lambda f: f[0][len(root) + 1:].encode())
            return ([u for u, _ in found], [u[len(root) + 1:] for u, _ in found],
                    [n for _, n in found])
        if not _remote(p) and os.path.isdir(p):
            rel: List[str] = []
            for d, _dirs, files in os.walk(p):
                for name in files:
                    full = os.path.join(d, name)
                    if name.endswith(".a2run2") and name != ".a2run2" and os.path.isfile(full):
                        rel.append(os.path.relpath(full, p))
            if not rel:
                raise FileNotFoundError(f"{p}: no .a2run2 files under it")
            rel.sort(key=os.fsencode)
            full_paths = [os.path.join(p, r) for r in rel]
            return full_paths, rel, [os.path.getsize(f) for f in full_paths]
        seq: List[str] = [p]
    else:
        seq = [os.fspath(x) for x in paths]
        if not seq:
            raise ValueError("read_runs: the list of run files is empty")
    sizes = []
    for f in seq:
        if not _remote(f) and not os.path.isfile(f):
            raise FileNotFoundError(f"{f}: no such run file" + (
                " (a folder that does not exist?)" if not f.endswith(".a2run2") else ""))
        sizes.append(_size(f))
    return seq, list(seq), sizes


def _decode_files(paths: Sequence[str], payloads: List[bytes]) -> RunBatch:
    try:
        return decode_batch(payloads)
    except Error:
        pass
    for p, data in zip(paths, payloads):  # which file is bad: one by one
        try:
            RunV2.from_bytes(data)
        except Error as e:
            raise type(e)(f"{p}: {e}") from e
    return decode_batch(payloads)


def _read_run_files(paths: Sequence[str], keys: Sequence[str], first: int,
                    columns: Optional[Sequence[str]]) -> Iterator[pa.Table]:
    for a, b in _chunks_by(len(paths), _RUNS_PER_BLOCK):
        part = list(paths[a:b])
        payloads = [_read_bytes(p) for p in part]
        batch = _decode_files(part, payloads) if _needs_decoding(columns) else None
        yield _run_rows_table(batch, pa.array(list(keys[a:b]), pa.string()),
                              np.arange(first + a, first + b, dtype=np.int64), part, payloads,
                              columns)


def _chunks_by(n: int, per: int) -> List[Tuple[int, int]]:
    return [(a, min(a + per, n)) for a in range(0, n, per)]


class RunsDatasource(_A2Datasource):
    """Run files as rows (see :func:`read_runs`)."""

    _known = RUN_COLUMNS

    def __init__(self, paths: Paths, *, columns: Optional[Sequence[str]] = None) -> None:
        super().__init__(columns)
        self._paths, self._keys, self._sizes = _list_runs(paths)

    def get_name(self) -> str:
        return "ReadA2Runs"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        # The bytes themselves plus the decoded columns: about 2.5 times the
        # files (27 bytes of columns a step against ~15-20 in a v2 file).
        return int(sum(self._sizes) * 2.5)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context: Any = None) -> List[ReadTask]:
        tasks = []
        cols = self._columns()
        for a, b in _split_even(len(self._paths), parallelism):
            size = int(sum(self._sizes[a:b]) * 2.5)
            tasks.append(ReadTask(functools.partial(_read_run_files, self._paths[a:b],
                                                    self._keys[a:b], a, cols),
                                  _metadata(b - a, size, self._paths[a:b]),
                                  schema=_select(_run_schema("string"), cols),
                                  per_task_row_limit=per_task_row_limit))
        return tasks


def read_runs(paths: Paths, *, columns: Optional[Sequence[str]] = None,
              **read_args: Any) -> "ray.data.Dataset":
    """A Ray Dataset of run files, one row per run (columns :data:`RUN_COLUMNS`).

    ``paths``: a folder (every ``*.a2run2`` under it, recursively, in byte
    order of the relative paths, which are the keys), a glob pattern, one
    file or a list of files (keyed by their paths, in the order given);
    local paths or ``s3://``/``gs://`` URLs. The library decodes each read
    task's runs in one call (a damaged file is an error naming it); the
    step columns are views of the decoded batch, the ``run`` column the
    files' bytes."""
    return ray.data.read_datasource(RunsDatasource(paths, columns=columns), **read_args)


# ------------------------------------------------------------------ read_pack
def _pack_files(path: Paths) -> List[str]:
    if isinstance(path, (str, os.PathLike)):
        p = os.fspath(path)
        if _has_magic(p):
            return [f for f, _ in _glob(p, "packfile")]
        return [p]
    files = [os.fspath(x) for x in path]
    if not files:
        raise ValueError("read_pack: the list of packfiles is empty")
    return files


def _read_pack_range(files: Sequence[str], counts: Sequence[int], start: int, stop: int,
                     verify: bool, columns: Optional[Sequence[str]]) -> Iterator[pa.Table]:
    """Entries [start, stop) of the packs (global indices over the files in order)."""
    want_bytes = columns is None or "run" in columns
    base = 0
    for f, n in zip(files, counts):
        lo, hi = max(start, base), min(stop, base + n)
        if lo < hi:
            with PackReader(f, verify=verify) as reader:
                for a, b in _chunks_by(hi - lo, _RUNS_PER_BLOCK):
                    local = np.arange(lo - base + a, lo - base + b, dtype=np.uint64)
                    try:
                        batch = (reader.decode_batch_columns(local, 1)
                                 if _needs_decoding(columns) else None)
                        payloads = [reader.read(int(i)) for i in local] if want_bytes else None
                    except Error as e:
                        raise type(e)(f"{f}: {e}" if f not in str(e) else str(e)) from e
                    g = np.arange(lo + a, lo + b, dtype=np.int64)
                    yield _run_rows_table(batch, pa.array(g, pa.int64()), g, [f] * (b - a),
                                          payloads, columns)
        base += n


class PackDatasource(_A2Datasource):
    """Packfile entries as run rows (see :func:`read_pack`)."""

    _known = RUN_COLUMNS

    def __init__(self, path: Paths, *, columns: Optional[Sequence[str]] = None,
                 verify: bool = True) -> None:
        super().__init__(columns)
        self._files = _pack_files(path)
        self._verify = verify
        self._counts: List[int] = []
        self._bytes: List[npt.NDArray[np.int64]] = []
        for f in self._files:
            with PackReader(f, verify=verify) as r:  # opening checks the index
                self._counts.append(len(r))
                entries = pa.record_batch(r.arrow_entries())  # type: ignore[attr-defined]
                self._bytes.append(np.asarray(entries.column("raw_length").to_numpy(),
                                              np.int64))
        self._raw = np.concatenate(self._bytes) if self._bytes else np.zeros(0, np.int64)

    def get_name(self) -> str:
        return "ReadA2Pack"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return int(self._raw.sum() * 2.5)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context: Any = None) -> List[ReadTask]:
        total = sum(self._counts)
        cols = self._columns()
        tasks = []
        for a, b in _split_even(total, parallelism):
            tasks.append(ReadTask(
                functools.partial(_read_pack_range, self._files, self._counts, a, b,
                                  self._verify, cols),
                _metadata(b - a, int(self._raw[a:b].sum() * 2.5), self._files),
                schema=_select(_run_schema("int64"), cols),
                per_task_row_limit=per_task_row_limit))
        return tasks


def read_pack(path: Paths, *, columns: Optional[Sequence[str]] = None, verify: bool = True,
              **read_args: Any) -> "ray.data.Dataset":
    """A Ray Dataset of the runs of one or more packfiles (a path, a glob
    pattern, or a list; local or ``s3://``/``gs://``), one row per entry:
    :data:`RUN_COLUMNS`, ``key`` and ``index`` being the entry's index over
    all the packs in order. Read tasks take contiguous entry ranges; the
    library decodes each block's entries in one call (a damaged entry is an
    error naming the pack and the entry)."""
    return ray.data.read_datasource(PackDatasource(path, columns=columns, verify=verify),
                                    **read_args)


# ------------------------------------------------------------------ read_bag
def _bag_spec(path: Paths) -> str:
    """The spec the library reads: glob patterns expanded into a comma list
    (``name@N``/``name@*`` shard specs and comma lists are the library's)."""
    if not isinstance(path, (str, os.PathLike)):
        files = [os.fspath(x) for x in path]
        if not files:
            raise ValueError("read_bag: the list of record files is empty")
        return ",".join(files)
    spec = os.fspath(path)
    parts = []
    for part in spec.split(","):
        if _has_magic(part) and "@*" not in os.path.basename(part):
            parts += [f for f, _ in _glob(part, "record file")]
        else:
            parts.append(part)
    return ",".join(parts)


def _read_bag_range(spec: str, start: int, stop: int, columns: Optional[Sequence[str]]
                    ) -> Iterator[pa.Table]:
    reader = _bag.Reader(spec, _bag.Reader.Options(max_parallelism=1))
    per = max(1, min(_RECORDS_PER_BLOCK,
                     int(_BLOCK_BYTES // max(reader.approximate_bytes_per_record(), 1.0))))
    h: Any = getattr(reader, "_h")  # the library's reader: batches export to Arrow uncopied
    for a, b in _chunks_by(stop - start, per):
        out: Dict[str, pa.Array] = {}
        if columns is None or "record" in columns:
            out["record"] = bag_batch_arrow(h.ptr, start + a, b - a, 1).column(0)
        if columns is None or "index" in columns:
            out["index"] = pa.array(np.arange(start + a, start + b, dtype=np.int64))
        if not out:
            out["index"] = pa.array(np.arange(start + a, start + b, dtype=np.int64))
        yield pa.table(out)


class BagDatasource(_A2Datasource):
    """Records of record files as rows (see :func:`read_bag`)."""

    _known = ("record", "index")

    def __init__(self, path: Paths, *, columns: Optional[Sequence[str]] = None) -> None:
        super().__init__(columns)
        self._spec = _bag_spec(path)
        reader = _bag.Reader(self._spec)  # a missing or damaged file fails here, naming it
        self._count = len(reader)
        self._per = reader.approximate_bytes_per_record()

    def get_name(self) -> str:
        return "ReadA2Bag"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return int((self._per + 16) * self._count)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context: Any = None) -> List[ReadTask]:
        cols = self._columns()
        return [ReadTask(functools.partial(_read_bag_range, self._spec, a, b, cols),
                         _metadata(b - a, int((self._per + 16) * (b - a)), [self._spec]),
                         per_task_row_limit=per_task_row_limit)
                for a, b in _split_even(self._count, parallelism)]


def read_bag(path: Paths, *, columns: Optional[Sequence[str]] = None,
             **read_args: Any) -> "ray.data.Dataset":
    """A Ray Dataset of the records of ``path``: a ``.bag``/``.bagz`` file,
    ``name@N.bagz``, ``name@*.bagz``, a glob pattern, a comma list or a list
    of files (local or ``s3://``/``gs://``), one row per record: ``record``
    (large_binary, the library's read buffer without a copy) and ``index``
    (the record's index over all the shards). Read tasks take contiguous
    index ranges."""
    return ray.data.read_datasource(BagDatasource(path, columns=columns), **read_args)


# ------------------------------------------------------------------ read_dataset
def _dataset_plan(path: str) -> Dict[str, Any]:
    """What a read of a local dataset folder needs, from its manifest and
    metadata.db alone: committed rows, the runs' first rows and lengths (in
    row order), the layout and the shards."""
    manifest: Dict[str, Any] = {}
    mpath = os.path.join(path, "manifest.json")
    if os.path.exists(mpath):
        with open(mpath, encoding="utf-8") as f:
            manifest = json.load(f)
    db = os.path.join(path, "metadata.db")
    if not os.path.isfile(db):
        raise FileNotFoundError(f"{db}: no such file (is {path} a dataset folder?)")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        where = ""
        args: Tuple[int, ...] = ()
        if "next_run_id" in manifest:
            where, args = "WHERE id < ?", (int(manifest["next_run_id"]),)
        rows = con.execute(f"SELECT first_step_idx, num_steps FROM runs {where} "
                           "ORDER BY first_step_idx", args).fetchall()
    finally:
        con.close()
    first = np.array([r[0] for r in rows], np.int64)
    lens = np.array([r[1] for r in rows], np.int64)
    total = int(manifest["rows"]) if "rows" in manifest else int(lens.sum())
    keep = first < total
    return {"first": first[keep], "lens": lens[keep], "rows": total,
            "sharded": manifest.get("layout") == "sharded",
            "shards": [(os.path.join(path, s["file"]), int(s["first_row"]), int(s["rows"]))
                       for s in manifest.get("shards", [])]}


def _step_schema() -> pa.Schema:
    """The library's schema of dataset rows (a2pack_dataset_export_arrow)."""
    def fixed(t: Any, n: int) -> Any:
        return pa.list_(pa.field("item", t, nullable=False), n)
    return pa.schema([pa.field("board", pa.uint64(), nullable=False),
                      pa.field("exponents", fixed(pa.uint8(), 16), nullable=False),
                      pa.field("move", pa.uint8(), nullable=False),
                      pa.field("legal_mask", pa.uint8(), nullable=False),
                      pa.field("ev_values", fixed(pa.float32(), 4), nullable=False),
                      pa.field("run_id", pa.uint32(), nullable=False),
                      pa.field("step_index", pa.uint16(), nullable=False)])


def _step_table(rows: npt.NDArray[np.void], columns: Sequence[str]) -> pa.Table:
    """Rows of STEP_DTYPE in the library's step schema (for shards, which
    the library cannot open one at a time): one copy per column."""
    schema = _step_schema()
    n = len(rows)
    arrays = []
    for c in columns:
        t = schema.field(c).type
        if c == "exponents":
            b = np.ascontiguousarray(rows["board"])
            shifts = np.arange(60, -4, -4, dtype=np.uint64)  # cell 0 in the top nibble
            ex = ((b[:, None] >> shifts[None, :]) & np.uint64(0xF)).astype(np.uint8)
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(ex.reshape(-1)), type=t))
        elif c == "ev_values":
            ev = np.ascontiguousarray(rows["ev_values"], np.float32).reshape(n * 4)
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(ev), type=t))
        else:
            field = "ev_legal" if c == "legal_mask" else c
            arrays.append(pa.array(np.ascontiguousarray(rows[field]), t))
    return pa.Table.from_arrays(arrays, schema=pa.schema([schema.field(c) for c in columns]))


def _block_cuts(first: npt.NDArray[np.int64], a: int, b: int, target: int) -> List[Tuple[int, int]]:
    """Row ranges [x, y) covering [a, b) of about ``target`` rows each, cut
    only where a run starts (whole runs per block)."""
    starts = first[(first > a) & (first < b)]
    cuts = [a]
    for s in starts:
        if s - cuts[-1] >= target:
            cuts.append(int(s))
    cuts.append(b)
    return list(zip(cuts[:-1], cuts[1:]))


def _read_steps(path: str, plan_rows: Tuple[int, int], first: npt.NDArray[np.int64],
                sharded: bool, shards: Sequence[Tuple[str, int, int]], remote: bool,
                columns: Sequence[str]) -> Iterator[pa.Table]:
    a, b = plan_rows
    cuts = _block_cuts(first, a, b, _ROWS_PER_STEP_BLOCK)
    if sharded and not remote:
        # Each shard is a plain NPY file of the step dtype: mapped, and only
        # this task's rows are read.
        maps: Dict[str, npt.NDArray[np.void]] = {}
        for x, y in cuts:
            parts = []
            for f, s0, n in shards:
                lo, hi = max(x, s0), min(y, s0 + n)
                if lo < hi:
                    if f not in maps:
                        m = np.load(f, mmap_mode="r")
                        if m.dtype != STEP_DTYPE or len(m) != n:
                            raise ValueError(f"{f}: {len(m)} rows of {m.dtype}, but the "
                                             f"manifest says {n} rows of the step dtype")
                        maps[f] = m
                    parts.append(np.asarray(maps[f][lo - s0:hi - s0]))
            rows = np.concatenate(parts) if parts else np.zeros(0, STEP_DTYPE)
            yield _step_table(rows, columns)
        return
    # One steps.npy: mapped by the library (a remote dataset is loaded into
    # RAM), and each block gathered into Arrow columns by it.
    ds = Dataset(path, mmap=not remote, verify=False)
    try:
        for x, y in cuts:
            rb = pa.record_batch(dataset_gather_arrow(ds, np.arange(x, y, dtype=np.int64)))
            yield pa.table({c: rb.column(c) for c in columns})
    finally:
        ds.close()


class StepDatasetDatasource(_A2Datasource):
    """A step dataset's rows (see :func:`read_dataset`)."""

    _known = STEP_COLUMNS

    def __init__(self, path: PathLike, *, columns: Optional[Sequence[str]] = None,
                 verify: bool = True) -> None:
        super().__init__(columns)
        self._path = os.fspath(path)
        self._remote = _remote(self._path)
        self._plan: Dict[str, Any]
        if self._remote:
            # The library fetches metadata.db and the rows; the run starts
            # come from the step_index column.
            ds = Dataset(self._path, verify=verify)
            try:
                steps = ds.steps
                starts = np.flatnonzero(steps["step_index"] == 0).astype(np.int64)
                self._plan = {"first": starts, "rows": len(ds), "sharded": False, "shards": []}
            finally:
                ds.close()
        else:
            if not os.path.isdir(self._path):
                raise FileNotFoundError(f"{self._path}: no such dataset folder")
            if verify:
                verify_dataset(self._path)  # the library's full check: rows, CRCs, metadata.db
            self._plan = _dataset_plan(self._path)

    def get_name(self) -> str:
        return "ReadA2Dataset"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return int(self._plan["rows"]) * self._row_bytes()

    def _row_bytes(self) -> int:
        sizes = {"board": 8, "exponents": 16, "move": 1, "legal_mask": 1, "ev_values": 16,
                 "run_id": 4, "step_index": 2}
        return sum(sizes[c] for c in (self._columns() or STEP_COLUMNS))

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context: Any = None) -> List[ReadTask]:
        first: npt.NDArray[np.int64] = self._plan["first"]
        rows = int(self._plan["rows"])
        cols = self._columns() or list(STEP_COLUMNS)
        # Cut the runs into `parallelism` groups of about equal rows, at run starts.
        groups: List[Tuple[int, int]] = []
        if rows:
            parts = max(1, min(int(parallelism), len(first) or 1))
            bounds = [0]
            for k in range(1, parts):
                target = k * rows // parts
                i = int(np.searchsorted(first, target))
                cut = int(first[min(i, len(first) - 1)]) if len(first) else rows
                if bounds[-1] < cut < rows:
                    bounds.append(cut)
            bounds.append(rows)
            groups = list(zip(bounds[:-1], bounds[1:]))
        files = [s[0] for s in self._plan["shards"]] or [self._path]
        return [ReadTask(functools.partial(_read_steps, self._path, g,
                                           first[(first >= g[0]) & (first < g[1])],
                                           self._plan["sharded"], self._plan["shards"],
                                           self._remote, cols),
                         _metadata(g[1] - g[0], (g[1] - g[0]) * self._row_bytes(), files),
                         schema=_select(_step_schema(), cols),
                         per_task_row_limit=per_task_row_limit)
                for g in groups]


def read_dataset(path: PathLike, columns: Optional[Sequence[str]] = None, *, verify: bool = True,
                 **read_args: Any) -> "ray.data.Dataset":
    """A Ray Dataset of a step dataset's rows (single-file or sharded; local,
    or ``s3://``/``gs://``), one row per step, with the columns of
    :data:`STEP_COLUMNS` or those in ``columns`` (Ray's ``select_columns``
    is pushed down too). Blocks hold whole runs: read tasks and blocks are
    cut where a run starts. ``verify`` first checks the whole folder with
    the library (``a2pack dataset verify``: the rows' CRCs, metadata.db);
    the tasks then read only their rows: from a mapping of steps.npy,
    gathered into Arrow by the library, or from the shards' NPY files."""
    return ray.data.read_datasource(StepDatasetDatasource(path, columns=columns, verify=verify),
                                    **read_args)


# ------------------------------------------------------------------ read_log
def _remote_log_folder(url: str) -> Optional[List[Tuple[str, int]]]:
    """(path relative to the folder, size) of every object of the logger
    folder ``url``, or None when nothing under it looks like one."""
    base = _url(url).rstrip("/")
    objs = [(u[len(base) + 1:], n) for u, n in _remote_list(base, recursive=True)
            if u.startswith(base + "/")]
    if not any(r.endswith(".seg.zst") and r.count("/") <= 1 for r, _n in objs):
        return None
    return objs


def _log_folders(path: Paths) -> List[str]:
    if isinstance(path, (str, os.PathLike)):
        p = os.fspath(path)
        if _has_magic(p) and _remote(p):
            # Folders matching the pattern: the prefixes of the objects below
            # the pattern's fixed part that match it and hold segments.
            url = _url(p).rstrip("/")
            scheme, rest = url.split("://", 1)
            parts = rest.split("/")
            fixed = next(i for i, x in enumerate(parts) if glob.has_magic(x))
            base = f"{scheme}://" + "/".join(parts[:fixed])
            depth = len(parts)
            candidates = {f"{scheme}://" + "/".join(u.split("://", 1)[1].split("/")[:depth])
                          for u, _n in _remote_list(base, recursive=True)}
            found = sorted((c for c in candidates if fnmatch.fnmatchcase(c, url)
                            and _remote_log_folder(c) is not None), key=os.fsencode)
            if not found:
                raise FileNotFoundError(f"{p}: no logger folder matches this pattern")
            return found
        if _has_magic(p):
            found = sorted((d for d in glob.glob(p) if os.path.isdir(d)), key=os.fsencode)
            if not found:
                raise FileNotFoundError(f"{p}: no logger folder matches this pattern")
            return found
        folders = [p]
    else:
        folders = [os.fspath(x) for x in path]
        if not folders:
            raise ValueError("read_log: the list of logger folders is empty")
    out = []
    for f in folders:
        if _remote(f):
            f = _url(f).rstrip("/")
            if _remote_log_folder(f) is None:
                raise FileNotFoundError(f"{f}: no logger folder here (no segments/*.seg.zst "
                                        "objects under it)")
        elif not os.path.isdir(f):
            raise FileNotFoundError(f"{f}: no such logger folder")
        out.append(f)
    return out


def _segment_number(name: str) -> Optional[int]:
    stem = name[:-len(".seg.zst")] if name.endswith(".seg.zst") else ""
    return int(stem) if stem.isdigit() and (len(stem) == 5 or not stem.startswith("0")) else None


def _log_listing(folder: str) -> Tuple[Optional[List[Tuple[str, int]]], List[Tuple[str, int]]]:
    """(entries of segments/ or None without one, the folder's own files):
    (name, bytes) each, local or in a bucket."""
    if _remote(folder):
        objs = _remote_log_folder(folder) or []
        seg = [(r.split("/", 1)[1], n) for r, n in objs if r.startswith("segments/")]
        top = [(r, n) for r, n in objs if "/" not in r]
        return (seg if seg else None), top
    segdir = os.path.join(folder, "segments")
    top = [(n, os.path.getsize(os.path.join(folder, n))) for n in os.listdir(folder)
           if os.path.isfile(os.path.join(folder, n))]
    if not os.path.isdir(segdir):
        return None, top
    return [(n, os.path.getsize(os.path.join(segdir, n))) for n in os.listdir(segdir)], top


def _log_units(folder: str, strict: bool) -> Tuple[List[Tuple[str, int]], bool]:
    """(segment name, bytes) of a logger folder, in order, and whether the
    folder may be decoded a run of segments at a time: the layout with
    ``segments/``, segment numbers without a gap and nothing else in the
    folder that the library would report, and not ``strict``. (The plain
    layout chains epochs from segment to segment, and a gap or a stray name
    is reported only by a decode of the whole folder.)"""
    seg, top = _log_listing(folder)
    if seg is None:
        return sorted((n, size) for n, size in top if n.endswith(".seg.zst")), False
    numbers = [_segment_number(n) for n, _size in seg]
    ok = not strict and all(x is not None for x in numbers) and sorted(
        x for x in numbers if x is not None) == list(range(len(seg)))
    units = [(n, size) for n, size in seg if n.endswith(".seg.zst")]
    units.sort(key=lambda u: _segment_number(u[0]) or 0)
    return units, ok


def _fetch_log(folder: str, names: Optional[Sequence[str]], into: str) -> None:
    """Copy the logger folder ``folder`` (a bucket's) into ``into``: its
    streams' sidecars, and the segments ``names`` (None: every object)."""
    fs, base = _filesystem(folder)
    objs = _remote_log_folder(folder)
    if not objs:
        raise FileNotFoundError(f"{folder}: no logger folder here (no segments/*.seg.zst "
                                "objects under it)")
    for rel, _n in objs:
        if names is not None and not rel.startswith("streams/"):
            if not (rel.startswith("segments/") and rel.split("/", 1)[1] in names):
                continue
        dest = os.path.join(into, *rel.split("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        # As stored: no decompression by file name (pyarrow's streams and
        # copies would unpack a .zst segment).
        with fs.open_input_file(f"{base}/{rel}") as src, open(dest, "wb") as out:
            out.write(src.read())


def _log_table(data: LogData, folder: str, columns: Sequence[str]) -> pa.Table:
    t = data.to_arrow()
    out = {c: t.column(c) for c in columns if c in t.column_names}
    if "source" in columns:
        out["source"] = pa.array([folder] * len(data), pa.string())
    return pa.table({c: out[c] for c in columns})


def _decode_segments(folder: str, names: Optional[Sequence[str]], first: int, strict: bool
                     ) -> LogData:
    """Decode ``folder`` whole (``names`` None) or only the segments
    ``names`` (the first being segment number ``first``): a folder of links
    to them and to the streams' sidecars (of copies, for a folder in a
    bucket), decoded by the library, whose report of the segments before
    ``first`` as missing is expected and dropped; every other problem is
    logged, naming the real folder."""
    import warnings

    from .logger import DecodeWarning

    if names is None and not _remote(folder):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DecodeWarning)  # logged below
            data = _decode_log(folder, strict=strict, workers=1)
        for p in data.problems:
            _LOG.warning("%s", p)
        return data
    tmp = tempfile.mkdtemp(prefix="a2pack-ray-log-")
    try:
        if _remote(folder):
            _fetch_log(folder, names, tmp)
        else:
            os.mkdir(os.path.join(tmp, "segments"))
            streams = os.path.join(folder, "streams")
            if os.path.isdir(streams):
                os.symlink(os.path.abspath(streams), os.path.join(tmp, "streams"))
            for n in names or []:
                os.symlink(os.path.abspath(os.path.join(folder, "segments", n)),
                           os.path.join(tmp, "segments", n))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DecodeWarning)
            try:
                data = _decode_log(tmp, strict=strict if names is None else False, workers=1)
            except Error as e:  # strict: the error names the real folder, not the copy
                raise type(e)(e.message.replace(tmp, folder), e.status) from None
        for p in data.problems:
            missing_before = (names is not None and p.status == "A2PACK_E_NOT_FOUND"
                              and p.offset == 0 and first > 0
                              and (_segment_number(os.path.basename(p.path)) or 0) < first)
            if not missing_before:
                _LOG.warning("%s", str(p).replace(tmp, folder))
        return data
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# One read unit of a log: (folder, segment names or None for all, first segment number).
_LogPart = Tuple[str, Optional[List[str]], int]


def _read_logs(parts: Sequence[_LogPart], strict: bool, columns: Sequence[str]
               ) -> Iterator[pa.Table]:
    for folder, names, first in parts:
        yield _log_table(_decode_segments(folder, names, first, strict), folder, columns)


class LogDatasource(_A2Datasource):
    """Data-logger records as rows (see :func:`read_log`)."""

    _known = ("stream_id", "epoch", "indices", "values", "source")

    def __init__(self, path: Paths, *, columns: Optional[Sequence[str]] = None,
                 strict: bool = False) -> None:
        super().__init__(columns)
        self._folders = _log_folders(path)
        self._strict = strict
        self._units: List[Tuple[str, List[Tuple[str, int]], bool]] = []
        for f in self._folders:
            units, splittable = _log_units(f, strict)
            if not units:
                raise FileNotFoundError(f"{f}: no logger segments in it (segments/*.seg.zst)")
            self._units.append((f, units, splittable))

    def get_name(self) -> str:
        return "ReadA2Log"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        # Segments expand about 2-fold on decode, and the columns take more
        # than the records (docs/logger.md, "Limits").
        return int(sum(n for _f, units, _s in self._units for _u, n in units) * 4)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context: Any = None) -> List[ReadTask]:
        cols = self._columns() or list(self._known)
        # Pieces: a whole folder, or each segment of a splittable one; then
        # contiguous runs of pieces per task (a folder's segments together).
        pieces: List[Tuple[str, Optional[int], int]] = []  # (folder, segment index, bytes)
        for f, units, splittable in self._units:
            if splittable:
                pieces += [(f, k, n) for k, (_u, n) in enumerate(units)]
            else:
                pieces.append((f, None, sum(n for _u, n in units)))
        names = {f: [u for u, _n in units] for f, units, _s in self._units}
        tasks = []
        for a, b in _split_even(len(pieces), parallelism):
            parts: List[_LogPart] = []
            for f, k, _n in pieces[a:b]:
                if k is None:
                    parts.append((f, None, 0))
                elif parts and parts[-1][0] == f and parts[-1][1] is not None:
                    segs = parts[-1][1]
                    assert segs is not None
                    segs.append(names[f][k])
                else:
                    parts.append((f, [names[f][k]], k))
            # A part holding all of a folder's segments is the folder itself.
            parts = [(f, None if segs is not None and len(segs) == len(names[f]) else segs, k)
                     for f, segs, k in parts]
            size = int(sum(n for _f, _k, n in pieces[a:b]) * 4)
            tasks.append(ReadTask(functools.partial(_read_logs, parts, self._strict, cols),
                                  _metadata(None, size, sorted({p[0] for p in parts})),
                                  per_task_row_limit=per_task_row_limit))
        return tasks


def read_log(path: Paths, *, columns: Optional[Sequence[str]] = None, strict: bool = False,
             **read_args: Any) -> "ray.data.Dataset":
    """A Ray Dataset of data-logger records, one row per record:
    ``stream_id``, ``epoch``, ``indices``, ``values`` (the columns of
    :meth:`a2pack.LogData.to_arrow`) and ``source`` (the folder). ``path``
    is a logger folder, a glob of folders or a list of them, local or
    ``s3://``/``gs://`` (a task copies the segments it reads, and the
    streams' sidecars, to a temporary folder and decodes them there).

    Read tasks take runs of consecutive segments: the library decodes each
    task's segments (a folder of links to them beside the streams'
    sidecars). Row counts are known only once decoded (the block metadata
    gives the segments' bytes). A folder in the plain layout (whose epochs
    chain from segment to segment), one with a gap in its segment numbers
    and any folder read with ``strict=True`` is decoded whole by one task,
    so that the library sees, and reports, all of it. Damaged frames are
    skipped and logged; ``strict=True`` makes them an error naming the
    segment and offset."""
    return ray.data.read_datasource(LogDatasource(path, columns=columns, strict=strict),
                                    **read_args)


# ------------------------------------------------------------------ runs in, files out
def runs_table(runs: Sequence[Union[RunV2, bytes]], keys: Optional[Sequence[Any]] = None,
               *, columns: Optional[Sequence[str]] = None) -> pa.Table:
    """Run rows (:data:`RUN_COLUMNS`) for runs made in Python - the engine's
    ``a2pack.generate_run``, an actor's games - to hand to
    ``ray.data.from_arrow`` or return from ``map_batches``. ``keys`` (str or
    int, one per run, unique) order them in the sinks; by default their
    positions."""
    payloads = [r.to_bytes("v2") if isinstance(r, RunV2) else bytes(r) for r in runs]
    ks = list(range(len(payloads))) if keys is None else list(keys)
    if len(ks) != len(payloads):
        raise ValueError(f"runs_table: {len(payloads)} runs but {len(ks)} keys")
    batch = decode_batch(payloads) if payloads else None
    if batch is None:
        return pa.table({})
    key_arr = pa.array(ks, pa.int64() if all(isinstance(k, int) for k in ks) else pa.string())
    return _run_rows_table(batch, key_arr, np.arange(len(payloads), dtype=np.int64),
                           ["python"] * len(payloads), payloads, columns)


def _path_order(key: Any) -> Any:
    """A relative path key compared component by component (``a2pack pack``'s
    order of a folder); other keys as they are."""
    if isinstance(key, str):
        return tuple(os.fsencode(key).split(b"/"))
    if isinstance(key, bytes):
        return tuple(key.split(b"/"))
    return key


def _byte_order(key: Any) -> Any:
    """String keys as bytes (``a2pack dataset build``'s order of a folder)."""
    return os.fsencode(key) if isinstance(key, str) else key


def _sorted_keys(keys: Sequence[Any], order: Callable[[Any], Any], what: str) -> List[int]:
    try:
        idx = sorted(range(len(keys)), key=lambda i: order(keys[i]))
    except TypeError as e:
        raise TypeError(f"{what}: the runs' keys cannot be ordered ({e}); give every run a key "
                        "of one type (all ints or all strings)") from e
    for x, y in zip(idx, idx[1:]):
        if order(keys[x]) == order(keys[y]):
            raise ValueError(f"{what}: two runs have the key {keys[x]!r}, so their order would "
                             "depend on scheduling; give each run its own key")
    return idx


def _table(block: Any) -> pa.Table:
    from ray.data.block import BlockAccessor

    table: pa.Table = BlockAccessor.for_block(block).to_arrow()
    return table


def _payloads(table: pa.Table, column: str, what: str) -> List[bytes]:
    """The bytes of each row's ``column`` (for ``run``: the run-file bytes,
    or v2 bytes made from the step columns of rows that have no bytes)."""
    if column in table.column_names:
        return [bytes(v) for v in table.column(column).to_pylist()]
    if column == "run" and {"boards", "moves"} <= set(table.column_names):
        return [_run_from_row(table, i) for i in range(table.num_rows)]
    raise ValueError(f"{what}: the rows have no {column!r} column (they have "
                     f"{', '.join(table.column_names) or 'none'})")


def _run_from_row(table: pa.Table, i: int) -> bytes:
    """A run row without its bytes made into v2 run-file bytes from its columns."""
    row = {c: table.column(c)[i].as_py() for c in table.column_names}
    n = len(row["boards"])
    meta = Meta(steps=int(row.get("num_steps") or n), start_unix_s=int(row.get("start_unix_s") or 0),
                elapsed_s=float(row.get("elapsed_s") or 0.0), max_score=int(row.get("max_score") or 0),
                highest_tile=int(row.get("highest_tile") or 0), engine_str=row.get("engine"))
    boards = np.array(row["boards"], np.uint64)
    moves = np.array(row["moves"], np.uint8)
    if row.get("branch_values") is not None and row.get("legal_masks") is not None:
        run = RunV2.from_arrays(meta, boards, moves, np.array(row["branch_values"], np.float32),
                                np.array(row["legal_masks"], np.uint8),
                                final_board=int(row.get("final_board") or 0))
    else:
        run = RunV2.from_arrays(meta, boards, moves, final_board=int(row.get("final_board") or 0))
    return run.to_bytes("v2")


def _keys(table: pa.Table, order_by: Optional[str], what: str) -> Optional[List[Any]]:
    if order_by is None:
        return None
    if order_by not in table.column_names:
        raise ValueError(f"{what}: the rows have no {order_by!r} column to order them by (they "
                         f"have {', '.join(table.column_names)}); give order_by= a column "
                         "holding a unique key of each row, or None")
    keys: List[Any] = table.column(order_by).to_pylist()
    if any(k is None for k in keys):
        raise ValueError(f"{what}: a row's {order_by!r} is null")
    return keys


# One staged row: (order key, staging file, offset, length, CRC-32).
_OPEN_STAGES = 64  # staging files the driver keeps open at once while it writes
_Staged = Tuple[Any, str, int, int, int]


def _staging_dir(output: str, staging_dir: Optional[PathLike], what: str) -> str:
    """The folder the write tasks stage into: beside the output (local), or
    ``staging_dir``; it must be reachable by the workers and the driver."""
    if staging_dir is not None:
        base = os.fspath(staging_dir)
    elif _remote(output):
        base = tempfile.gettempdir()
    else:
        base = os.path.dirname(os.path.abspath(output))
    name = os.path.basename(output.rstrip("/")) or what
    return os.path.join(base, f".a2pack-ray-{name}-{uuid.uuid4().hex}")


class _StagedSink(Datasink):  # type: ignore[misc]  # Ray's classes are Any to mypy
    """Write tasks append each row's bytes to a staging file of the task and
    return (key, file, offset, length, crc); the driver sorts the keys when
    the write completes and writes the output from the staged bytes in that
    order, so the output depends on the rows, never on blocks or scheduling.
    The staging folder goes at the end, whether the write succeeded or not."""

    _what = "write"
    _column = "run"

    def __init__(self, output: PathLike, order_by: Optional[str], staging_dir: Optional[PathLike]
                 ) -> None:
        self._out = os.fspath(output)
        self._order_by = order_by
        self._stage = _staging_dir(self._out, staging_dir, self._what)
        self.result: Optional[Dict[str, Any]] = None

    def get_name(self) -> str:
        return self._what

    def on_write_start(self, schema: Optional[Any] = None) -> None:
        if not _remote(self._stage):
            os.makedirs(self._stage, exist_ok=True)

    def write(self, blocks: Iterable[Any], ctx: Any) -> List[Tuple[int, List[_Staged]]]:
        os.makedirs(self._stage, exist_ok=True)
        path = os.path.join(self._stage, f"{uuid.uuid4().hex}.stage")
        staged: List[_Staged] = []
        at = 0
        task = int(getattr(ctx, "task_idx", 0))
        with open(path, "wb") as f:
            for block in blocks:
                table = _table(block)
                datas = _payloads(table, self._column, self._what)
                keys = _keys(table, self._order_by, self._what)
                for i, data in enumerate(datas):
                    key = keys[i] if keys is not None else (task, len(staged))
                    f.write(data)
                    staged.append((key, path, at, len(data), zlib.crc32(data)))
                    at += len(data)
        return [(task, staged)]

    def on_write_complete(self, write_result: Any) -> None:
        try:
            staged = [s for ret in write_result.write_returns for _task, part in ret
                      for s in part]
            self.result = self._finish(staged)
        finally:
            shutil.rmtree(self._stage, ignore_errors=True)

    def on_write_failed(self, error: Exception) -> None:
        shutil.rmtree(self._stage, ignore_errors=True)

    def _finish(self, staged: List[_Staged]) -> Dict[str, Any]:
        raise NotImplementedError

    def _order(self, staged: List[_Staged], order: Callable[[Any], Any]) -> List[int]:
        return _sorted_keys([s[0] for s in staged], order if self._order_by else (lambda k: k),
                            self._what)

    def _in_order(self, staged: List[_Staged], order: Optional[Callable[[Any], Any]]
                  ) -> Iterator[Tuple[Any, bytes]]:
        """(key, bytes) of the staged rows in key order (``order`` None: in
        the order given), each checked against the CRC its write task took."""
        idx = range(len(staged)) if order is None else self._order(staged, order)
        files: Dict[str, IO[bytes]] = {}
        try:
            for i in idx:
                key, path, at, n, crc = staged[i]
                f = files.get(path)
                if f is None:
                    if len(files) >= _OPEN_STAGES:
                        files.pop(next(iter(files))).close()
                    f = files[path] = open(path, "rb")
                f.seek(at)
                data = f.read(n)
                if len(data) != n or zlib.crc32(data) != crc:
                    raise IOError(f"{self._what}: the row with key {key!r}: its staged copy in "
                                  f"{path} (offset {at}, {n} bytes) does not read back as written")
                yield key, data
        finally:
            for f in files.values():
                f.close()


class PackDatasink(_StagedSink):
    """Runs to one packfile (see :func:`write_pack`)."""

    _what = "write_pack"

    def __init__(self, path: PathLike, *, order_by: Optional[str] = "key",
                 staging_dir: Optional[PathLike] = None, **writer_options: Any) -> None:
        super().__init__(path, order_by, staging_dir)
        if "expected_count" in writer_options:
            raise TypeError("write_pack: expected_count is the number of rows")
        self._options = writer_options

    def _finish(self, staged: List[_Staged]) -> Dict[str, Any]:
        # The pack is written under a temporary name and appears only when
        # finished; anything failing before leaves no file at the path.
        writer = PackWriter(self._out, expected_count=len(staged) or None, **self._options)
        try:
            for key, data in self._in_order(staged, _path_order):
                try:
                    writer.add(data)
                except Error as e:
                    raise type(e)(f"write_pack: the run with key {key!r}: {e}") from e
            summary = writer.finish()
        finally:
            writer.close()
        return {"path": self._out, "runs": len(staged), "bytes": sum(s[3] for s in staged),
                "summary": summary}


class BagDatasink(_StagedSink):
    """Records to record files (see :func:`write_bag`)."""

    _what = "write_bag"

    def __init__(self, path: PathLike, *, column: Optional[str] = None,
                 order_by: Optional[str] = "key",
                 staging_dir: Optional[PathLike] = None,
                 options: Optional[_bag.Writer.Options] = None) -> None:
        super().__init__(path, order_by, staging_dir)
        self._column_arg = column
        self._options = options

    def write(self, blocks: Iterable[Any], ctx: Any) -> List[Tuple[int, List[_Staged]]]:
        blocks = list(blocks)
        names = set(_table(blocks[0]).column_names) if blocks else set()
        self._column = self._column_arg or ("record" if "record" in names else "run")
        if self._order_by == "key" and blocks and "key" not in names:
            self._order_by = None  # the default, for rows without keys: the tasks' order
        return super().write(blocks, ctx)

    def _finish(self, staged: List[_Staged]) -> Dict[str, Any]:
        # The library's sharded writer: record i to shard i mod N, each shard
        # under a temporary name until it is committed.
        n = 0
        with _bag.Writer(self._out, self._options) as w:
            for _key, data in self._in_order(staged, _path_order):
                w.write(data)
                n += 1
        return {"path": self._out, "records": n, "bytes": sum(s[3] for s in staged)}


class AppendDatasink(_StagedSink):
    """Runs appended to a step dataset (see :func:`append_dataset`)."""

    _what = "append_dataset"

    def __init__(self, path: PathLike, *, order_by: Optional[str] = "key",
                 staging_dir: Optional[PathLike] = None, allow_missing_branches: bool = False,
                 skip_bad: bool = False, shard_rows: int = 0,
                 lock_timeout: Optional[float] = 60.0, source_input: str = "ray",
                 source_kind: str = "ray") -> None:
        super().__init__(path, order_by, staging_dir)
        self._source = (source_input, source_kind)
        self._opts: Dict[str, Any] = dict(allow_missing_branches=allow_missing_branches,
                                          skip_bad=skip_bad, shard_rows=int(shard_rows),
                                          lock_timeout=lock_timeout)

    def on_write_start(self, schema: Optional[Any] = None) -> None:
        if not os.path.isdir(self._out):
            raise FileNotFoundError(f"{self._out}: no such dataset folder to append to")
        super().on_write_start(schema)

    def _finish(self, staged: List[_Staged]) -> Dict[str, Any]:
        if not staged:
            raise ValueError(f"append_dataset: no runs to append to {self._out}")
        # The runs in key order, each checked against its write task's CRC,
        # then appended by the library straight from the staging files
        # (atomic: the dataset is the old one or the new one; the manifest
        # names Ray as the source).
        order = [staged[i] for i in self._order(staged, _byte_order)]
        for _ in self._in_order(order, None):
            pass
        result = _append_runs(self._out, [(path, at, n) for _k, path, at, n, _c in order],
                              labels=[str(k) for k, *_rest in order], source=self._source[0],
                              source_kind=self._source[1], **self._opts)
        result["bad_runs"] = sorted(result.pop("skipped", []))
        result["path"] = self._out
        return result


# The rows of one good run, or why a run is bad: (key, meta, rows) / (key, None, message).
_Made = Tuple[Any, Optional[RunMeta], Any]


class DatasetDatasink(Datasink):  # type: ignore[misc]  # Ray's classes are Any to mypy
    """Runs to a step dataset folder (see :func:`write_dataset`): the write
    tasks turn runs into rows (:func:`a2pack.dataset_rows.run_rows`), the
    driver hands all of them, in key order, to the library's builder."""

    def __init__(self, path: PathLike, *, order_by: Optional[str] = "key",
                 allow_missing_branches: bool = False, overwrite: bool = False,
                 skip_bad: bool = False, source_input: str = "ray", source_kind: str = "ray",
                 shard_rows: int = 0) -> None:
        self._out = os.fspath(path)
        self._order_by = order_by
        self._allow_missing = allow_missing_branches
        self._overwrite = overwrite
        self._skip_bad = skip_bad
        self._source = (source_input, source_kind)
        self._shard_rows = int(shard_rows)
        self.result: Optional[Dict[str, Any]] = None

    def get_name(self) -> str:
        return "write_dataset"

    def write(self, blocks: Iterable[Any], ctx: Any) -> List[_Made]:
        made: List[_Made] = []
        task = int(getattr(ctx, "task_idx", 0))
        for block in blocks:
            table = _table(block)
            datas = _payloads(table, "run", "write_dataset")
            keys = _keys(table, self._order_by, "write_dataset")
            for i, data in enumerate(datas):
                key = keys[i] if keys is not None else (task, len(made))
                try:
                    meta, rows = run_rows(data, allow_missing_branches=self._allow_missing,
                                          label=f"the run with key {key!r}")
                except RowsError as e:
                    if not self._skip_bad:
                        raise
                    _LOG.warning("write_dataset: skipping %s", e)
                    made.append((key, None, str(e)))
                    continue
                made.append((key, meta, rows))
        return made

    def on_write_complete(self, write_result: Any) -> None:
        made: List[_Made] = [m for ret in write_result.write_returns for m in ret]
        bad = [(str(k), why) for k, meta, why in made if meta is None]
        good = [m for m in made if m[1] is not None]
        order = _sorted_keys([m[0] for m in good], _byte_order, "write_dataset")
        if not good:
            raise ValueError(f"write_dataset: no runs to build {self._out} from"
                             + (f" ({len(bad)} bad runs skipped; the first: {min(bad)[1]})"
                                if bad else ""))
        result = _write_rows(self._out, [(good[i][1], good[i][2]) for i in order],  # type: ignore[misc]
                             overwrite=self._overwrite, source_input=self._source[0],
                             source_kind=self._source[1], shard_rows=self._shard_rows)
        result["bad_runs"] = sorted(bad)
        self.result = result


def _write(ds: "ray.data.Dataset", sink: Any, concurrency: Optional[int],
           ray_remote_args: Optional[Dict[str, Any]], need: Sequence[Optional[str]]
           ) -> Dict[str, Any]:
    # When the columns are known without reading (a2pack's sources announce
    # them), only those the sink needs are read: Ray pushes the selection
    # into the read, which then skips decoding the runs.
    schema = ds.schema(fetch_if_missing=False)
    names = list(getattr(schema, "names", None) or [])
    cols = [c for c in need if c]
    if names and all(c in names for c in cols) and len(cols) < len(names):
        ds = ds.select_columns(cols)
    ds.write_datasink(sink, concurrency=concurrency, ray_remote_args=ray_remote_args or {})
    result: Dict[str, Any] = sink.result if sink.result is not None else {}
    return result


def write_pack(ds: "ray.data.Dataset", path: PathLike, *, order_by: Optional[str] = "key",
               staging_dir: Optional[PathLike] = None, concurrency: Optional[int] = None,
               ray_remote_args: Optional[Dict[str, Any]] = None,
               **writer_options: Any) -> Dict[str, Any]:
    """Write the runs of ``ds`` (rows with a ``run`` column of run-file
    bytes, as :func:`read_runs`, :func:`read_pack` and :func:`runs_table`
    make them; or the step columns, re-encoded as v2) to the packfile
    ``path``, in the order of their ``order_by`` column (a string key is
    compared as a relative path, component by component: the order of
    ``a2pack pack``), so the file is the same whatever the blocks and
    workers: for the runs of a folder, the bytes of ``a2pack pack -i
    folder``. Keyword arguments go to :class:`~a2pack.PackWriter`.

    The write tasks stage the runs' bytes in a folder beside ``path`` (or
    ``staging_dir``, which every worker and the driver must reach); the
    driver then writes the pack, which appears only when complete; the
    staging folder is removed either way. Returns ``path``, ``runs``,
    ``bytes`` and the writer's summary."""
    return _write(ds, PackDatasink(path, order_by=order_by, staging_dir=staging_dir,
                                   **writer_options), concurrency, ray_remote_args,
                  [order_by, "run"])


def write_bag(ds: "ray.data.Dataset", path: PathLike, *, column: Optional[str] = None,
              order_by: Optional[str] = "key", staging_dir: Optional[PathLike] = None,
              options: Optional[_bag.Writer.Options] = None, concurrency: Optional[int] = None,
              ray_remote_args: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Write one record per row of ``ds`` to ``path``: a ``.bag``/``.bagz``
    file or ``name@N.bagz`` (N shards, record i in shard i mod N, as bagz
    and ``a2pack bag convert`` write them). The record is the ``column``
    (default ``record`` when the rows have it, else ``run``); rows are
    ordered by ``order_by`` (default ``key``, string keys compared as
    paths; rows without that column - ``read_bag``'s - keep their write
    tasks' order, or pass ``order_by="index"``). Staged and written as
    :func:`write_pack`; each shard appears only when complete."""
    names = list(getattr(ds.schema(fetch_if_missing=False), "names", None) or [])
    record = column or ("record" if "record" in names else "run")
    order = order_by if order_by != "key" or "key" in names or not names else None
    return _write(ds, BagDatasink(path, column=column, order_by=order_by,
                                  staging_dir=staging_dir, options=options),
                  concurrency, ray_remote_args, [order, record])


def write_dataset(ds: "ray.data.Dataset", path: PathLike, *, order_by: Optional[str] = "key",
                  allow_missing_branches: bool = False, overwrite: bool = False,
                  skip_bad: bool = False, source_input: str = "ray", source_kind: str = "ray",
                  shard_rows: int = 0, concurrency: Optional[int] = None,
                  ray_remote_args: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Build the step dataset ``path`` from the runs of ``ds`` (as for
    :func:`write_pack`), run ids in the order of ``order_by`` (string keys
    compared as bytes: the order of ``a2pack dataset build`` for a folder).
    The write tasks compute the rows; the driver sorts them and the
    library's builder writes steps.npy, metadata.db and manifest.json -
    the bytes of ``a2pack dataset build`` for the same runs when
    ``source_input``/``source_kind`` are its ``--input`` and ``"dir"`` /
    ``"pack"`` and both run with the same ``SOURCE_DATE_EPOCH``. The folder
    appears only complete (``overwrite`` replaces a dataset). ``skip_bad``
    leaves out runs that cannot become rows (listed in ``bad_runs``);
    ``shard_rows`` writes the sharded layout. The driver holds every row
    once. Returns path, runs, rows, bad_runs."""
    return _write(ds, DatasetDatasink(path, order_by=order_by,
                                      allow_missing_branches=allow_missing_branches,
                                      overwrite=overwrite, skip_bad=skip_bad,
                                      source_input=source_input, source_kind=source_kind,
                                      shard_rows=shard_rows), concurrency, ray_remote_args,
                  [order_by, "run"])


def append_dataset(ds: "ray.data.Dataset", path: PathLike, *, order_by: Optional[str] = "key",
                   staging_dir: Optional[PathLike] = None, allow_missing_branches: bool = False,
                   skip_bad: bool = False, shard_rows: int = 0,
                   lock_timeout: Optional[float] = 60.0, concurrency: Optional[int] = None,
                   ray_remote_args: Optional[Dict[str, Any]] = None,
                   source_input: str = "ray", source_kind: str = "ray") -> Dict[str, Any]:
    """Append the runs of ``ds`` to the dataset folder ``path`` with the
    library's append (``a2pack dataset append``: atomic, the new rows only,
    under the folder's lock, waiting up to ``lock_timeout`` seconds for
    readers), new run ids in the order of ``order_by`` (as
    :func:`write_dataset`). The runs are staged as for :func:`write_pack`;
    the library appends them from the staging files in that order
    (:func:`a2pack.append_runs`), so the dataset's files are those of
    ``a2pack dataset append`` of the same runs but for the manifest, whose
    source is ``source_input``/``source_kind`` (default ``ray``). Returns
    the append's counts and ``bad_runs`` (with ``skip_bad``)."""
    return _write(ds, AppendDatasink(path, order_by=order_by, staging_dir=staging_dir,
                                     allow_missing_branches=allow_missing_branches,
                                     skip_bad=skip_bad, shard_rows=shard_rows,
                                     lock_timeout=lock_timeout, source_input=source_input,
                                     source_kind=source_kind), concurrency, ray_remote_args,
                  [order_by, "run"])


# ------------------------------------------------------------------ Ray Train
#: The file of a checkpoint that holds the feed's state (its library bytes).
FEED_STATE_FILE = "a2pack_feed.state"
_FEED_INFO_FILE = "a2pack_feed.json"


def feed_state(checkpoint: Any) -> Optional[bytes]:
    """The feed state saved in a ``ray.train.Checkpoint`` by
    :func:`report_feed`, or None when it holds none."""
    with checkpoint.as_directory() as d:
        p = os.path.join(d, FEED_STATE_FILE)
        if not os.path.isfile(p):
            return None
        with open(p, "rb") as f:
            return f.read()


def train_feed(dataset: Union[PathLike, Dataset], indices: Optional[npt.ArrayLike] = None, *,
               checkpoint: Any = None, **feed_kwargs: Any) -> Feed:
    """An :class:`a2pack.Feed` for this Ray Train worker: ``rank`` and
    ``world`` are the worker's world rank and size, and the feed resumes
    from the state in ``checkpoint`` (default: ``ray.train.get_checkpoint()``,
    the run's latest, if any). ``batch_size`` is the global batch, as for
    the feed; the state is the same on every rank and independent of their
    number, so a run saved with 4 workers resumes with 2 (use
    ``drop_last=True`` where every worker must step the same number of
    times). Other keyword arguments go to the feed."""
    for k in ("rank", "world"):
        if k in feed_kwargs:
            raise TypeError(f"train_feed: {k} comes from the Ray Train context")
    ctx = ray.train.get_context()
    ds = dataset if isinstance(dataset, Dataset) else Dataset(dataset)
    feed = Feed(ds, indices, rank=int(ctx.get_world_rank()), world=int(ctx.get_world_size()),
                **feed_kwargs)
    ckpt = checkpoint if checkpoint is not None else ray.train.get_checkpoint()
    if ckpt is not None:
        state = feed_state(ckpt)
        if state is not None:
            feed.load_state_dict(state)
    return feed


def report_feed(feed: Feed, metrics: Mapping[str, Any], *,
                save: Optional[Callable[[str], None]] = None) -> None:
    """``ray.train.report(metrics, checkpoint=...)`` with a checkpoint that
    holds the feed's state (the position after the batches handed out so
    far) and whatever ``save(folder)`` writes beside it (the model, the
    optimiser). Every worker calls it at the same step; rank 0 writes the
    checkpoint (every rank's feed state is the same)."""
    if int(ray.train.get_context().get_world_rank()) != 0:
        ray.train.report(dict(metrics), checkpoint=None)
        return
    state = feed.state_dict()
    with tempfile.TemporaryDirectory(prefix="a2pack-feed-") as d:
        with open(os.path.join(d, FEED_STATE_FILE), "wb") as f:
            f.write(state["state"])
        with open(os.path.join(d, _FEED_INFO_FILE), "w", encoding="utf-8") as f:
            json.dump({k: v for k, v in state.items() if k != "state"}, f)
        if save is not None:
            save(d)
        ray.train.report(dict(metrics), checkpoint=ray.train.Checkpoint.from_directory(d))
