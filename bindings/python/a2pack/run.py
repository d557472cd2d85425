"""Run files (.a2run2 v1 and v2) and columnar run batches."""

# No `from __future__ import annotations` here: StepV2's field annotations
# must be real objects, because the NamedTuple's generated __new__ does not
# live in this module and a string annotation there cannot be resolved (pdoc).
import dataclasses
import os
import warnings
from typing import Any, Callable, ClassVar, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union, cast

import numpy as np
import numpy.typing as npt

from ._native import check, ffi, fspath, lib, view_array

KIND_NAMES: Dict[int, str] = {lib.A2PACK_RUN_V1: "v1", lib.A2PACK_RUN_V2: "v2"}
_KIND_CODES: Dict[str, int] = {"v1": lib.A2PACK_RUN_V1, "v2": lib.A2PACK_RUN_V2}

Branch = Optional[float]  # Legal(value) as a float, Illegal as None


@dataclasses.dataclass(frozen=True)
class Meta:
    steps: int
    start_unix_s: int
    elapsed_s: float
    max_score: int
    highest_tile: int
    engine_str: Optional[str] = None


class StepV2(NamedTuple):
    pre_board: int
    chosen: int  # 0 Up, 1 Down, 2 Left, 3 Right
    branches: Optional[Tuple[Branch, Branch, Branch, Branch]]


class StepsMismatchWarning(UserWarning):
    """A decoded run whose ``meta.steps`` differs from the steps it stores.

    A v2 file keeps the two apart and upstream decodes such a file without a
    word, so a2pack decodes it too (``meta.steps`` as stored, ``len(run)``
    the steps present) and warns. Turn the warning into an error with
    ``warnings.simplefilter("error", StepsMismatchWarning)``."""


def _warn_steps(run: "RunV2", where: str) -> "RunV2":
    if not run.meta_steps_ok:
        warnings.warn(StepsMismatchWarning(
            f"{where}: meta.steps {run.meta.steps} but the run stores {len(run)} steps"), stacklevel=3)
    return run


def detect_kind(data: bytes) -> str:
    """'v1' or 'v2' by the payload's first bytes."""
    return KIND_NAMES[lib.a2pack_run_detect_kind(data, len(data))]


def _kind_code(kind: str) -> int:
    try:
        return _KIND_CODES[kind]
    except KeyError:
        raise ValueError(f"kind must be 'v1' or 'v2', not {kind!r}") from None


class RunV2:
    """A decoded run in v2 shape (a v1 file is upgraded on load).

    Construct with RunV2(meta, steps, final_board), RunV2.from_arrays(...),
    RunV2.load(path) or RunV2.from_bytes(data). The step columns (`boards`,
    `moves`, `branch_values`, `legal_masks`, `branch_present`) are numpy
    arrays copied once from the library.
    """

    __slots__ = ("_h", "_cols")
    _h: Any  # cffi `a2pack_run *`, closed when collected
    _cols: Optional[Tuple["npt.NDArray[np.uint64]", "npt.NDArray[np.uint8]", "npt.NDArray[np.float32]",
                          "npt.NDArray[np.uint8]", "npt.NDArray[np.uint8]"]]

    def __init__(self, meta: Meta, steps: Sequence[StepV2], final_board: int) -> None:
        n = len(steps)
        boards = np.fromiter((s[0] for s in steps), dtype=np.uint64, count=n)
        moves = np.fromiter((s[1] for s in steps), dtype=np.uint8, count=n)
        values = np.zeros((n, 4), dtype=np.float32)
        legal = np.zeros(n, dtype=np.uint8)
        present = np.zeros(n, dtype=np.uint8)
        for i, s in enumerate(steps):
            if s[2] is None:
                continue
            present[i] = 1
            for k, b in enumerate(s[2]):
                if b is not None:
                    legal[i] |= 1 << k
                    values[i, k] = b
        self._init_from_arrays(meta, boards, moves, values, legal, present, final_board)

    # -- construction -----------------------------------------------------
    @classmethod
    def _adopt(cls, handle: Any) -> "RunV2":
        """Take ownership of an `a2pack_run *` returned by the library."""
        self = cls.__new__(cls)
        self._h = ffi.gc(handle, lib.a2pack_run_close)
        self._cols = None
        return self

    @classmethod
    def from_arrays(cls, meta: Meta, boards: "npt.ArrayLike", moves: "npt.ArrayLike",
                    branch_values: "Optional[npt.ArrayLike]" = None,
                    legal_masks: "Optional[npt.ArrayLike]" = None,
                    branch_present: "Optional[npt.ArrayLike]" = None,
                    final_board: int = 0) -> "RunV2":
        self = cls.__new__(cls)
        self._init_from_arrays(meta, boards, moves, branch_values, legal_masks, branch_present,
                               final_board)
        return self

    def _init_from_arrays(self, meta: Meta, boards: "npt.ArrayLike", moves: "npt.ArrayLike",
                          values: "Optional[npt.ArrayLike]", legal: "Optional[npt.ArrayLike]",
                          present: "Optional[npt.ArrayLike]", final_board: int) -> None:
        boards = np.ascontiguousarray(boards, dtype=np.uint64)
        moves = np.ascontiguousarray(moves, dtype=np.uint8)
        n = len(boards)
        if len(moves) != n:
            raise ValueError(f"boards has {n} entries but moves has {len(moves)}")
        cmeta = _meta_to_c(meta)
        keep = [cmeta]
        vptr = lptr = pptr = ffi.NULL
        if values is not None:
            values = np.ascontiguousarray(values, dtype=np.float32).reshape(n, 4)
            legal = np.ascontiguousarray(legal, dtype=np.uint8)
            vptr = ffi.from_buffer("float[]", values)
            lptr = ffi.from_buffer("uint8_t[]", legal)
            if present is not None:
                present = np.ascontiguousarray(present, dtype=np.uint8)
                pptr = ffi.from_buffer("uint8_t[]", present)
        out = ffi.new("a2pack_run **")
        check(lib.a2pack_run_create(cmeta[0], n, ffi.from_buffer("uint64_t[]", boards),
                                    ffi.from_buffer("uint8_t[]", moves), vptr, lptr, pptr,
                                    int(final_board), out))
        del keep
        self._h = ffi.gc(out[0], lib.a2pack_run_close)
        self._cols = None

    @classmethod
    def load(cls, path: "Union[str, os.PathLike[str]]") -> "RunV2":
        out = ffi.new("a2pack_run **")
        check(lib.a2pack_run_load(fspath(path), out))
        return _warn_steps(cls._adopt(out[0]), os.fsdecode(os.fspath(path)))

    @classmethod
    def from_bytes(cls, data: bytes) -> "RunV2":
        buf = ffi.from_buffer(data)
        out = ffi.new("a2pack_run **")
        check(lib.a2pack_run_decode(buf, len(data), out))
        return _warn_steps(cls._adopt(out[0]), "run bytes")

    # -- encoding ------------------------------------------------------------
    def to_bytes(self, kind: str = "v2", drop_branches: bool = False) -> bytes:
        data = ffi.new("uint8_t **")
        size = ffi.new("size_t *")
        flags = lib.A2PACK_ENCODE_DROP_BRANCHES if drop_branches else 0
        check(lib.a2pack_run_encode(self._h, _kind_code(kind), flags, data, size))
        try:
            return bytes(ffi.buffer(data[0], size[0]))
        finally:
            lib.a2pack_free(data[0])

    def save(self, path: "Union[str, os.PathLike[str]]", kind: str = "v2",
             drop_branches: bool = False) -> None:
        """Write atomically (temporary file + rename)."""
        flags = lib.A2PACK_ENCODE_DROP_BRANCHES if drop_branches else 0
        check(lib.a2pack_run_save(self._h, fspath(path), _kind_code(kind), flags))

    # -- access --------------------------------------------------------------
    @property
    def meta(self) -> Meta:
        m = ffi.new("a2pack_run_meta *")
        m.size = ffi.sizeof("a2pack_run_meta")
        check(lib.a2pack_run_get_meta(self._h, m))
        engine = ffi.unpack(m.engine, m.engine_len).decode("utf-8") if m.has_engine else None
        return Meta(int(m.steps), int(m.start_unix_s), float(m.elapsed_s), int(m.max_score),
                    int(m.highest_tile), engine)

    @property
    def source_kind(self) -> str:
        """'v1' or 'v2': the format the run was decoded from."""
        return KIND_NAMES.get(lib.a2pack_run_source_kind(self._h), "v2")

    @property
    def final_board(self) -> int:
        return int(lib.a2pack_run_final_board(self._h))

    @property
    def has_branches(self) -> bool:
        return bool(lib.a2pack_run_has_branches(self._h))

    def __len__(self) -> int:
        return int(lib.a2pack_run_step_count(self._h))

    @property
    def meta_steps_ok(self) -> bool:
        """Whether ``meta.steps`` equals the number of steps stored (always
        for v1 files and for upstream's v2 files; see StepsMismatchWarning)."""
        m = ffi.new("a2pack_run_meta *")
        m.size = ffi.sizeof("a2pack_run_meta")
        check(lib.a2pack_run_get_meta(self._h, m))
        return int(m.steps) == len(self)

    def _columns(self) -> Tuple["npt.NDArray[np.uint64]", "npt.NDArray[np.uint8]", "npt.NDArray[np.float32]",
                                "npt.NDArray[np.uint8]", "npt.NDArray[np.uint8]"]:
        if self._cols is None:
            n = len(self)
            boards = np.empty(n, dtype=np.uint64)
            moves = np.empty(n, dtype=np.uint8)
            values = np.empty((n, 4), dtype=np.float32)
            legal = np.empty(n, dtype=np.uint8)
            present = np.empty(n, dtype=np.uint8)
            if n:
                check(lib.a2pack_run_get_steps(
                    self._h, 0, n, ffi.from_buffer("uint64_t[]", boards),
                    ffi.from_buffer("uint8_t[]", moves), ffi.from_buffer("float[]", values),
                    ffi.from_buffer("uint8_t[]", legal), ffi.from_buffer("uint8_t[]", present)))
            for a in (boards, moves, values, legal, present):
                a.flags.writeable = False
            self._cols = (boards, moves, values, legal, present)
        return self._cols

    @property
    def boards(self) -> "npt.NDArray[np.uint64]":
        """u64[n]: the board before each step."""
        return self._columns()[0]

    @property
    def moves(self) -> "npt.NDArray[np.uint8]":
        return self._columns()[1]

    @property
    def branch_values(self) -> "npt.NDArray[np.float32]":
        """f32[n, 4] (UDLR); 0 where illegal or absent."""
        return self._columns()[2]

    @property
    def legal_masks(self) -> "npt.NDArray[np.uint8]":
        return self._columns()[3]

    @property
    def branch_present(self) -> "npt.NDArray[np.uint8]":
        return self._columns()[4]

    @property
    def states(self) -> "npt.NDArray[np.uint64]":
        """u64[n + 1]: every board including the final one (the v1 view)."""
        return np.append(self.boards, np.uint64(self.final_board))

    @property
    def steps(self) -> List[StepV2]:
        boards, moves, values, legal, present = self._columns()
        out = []
        for i in range(len(boards)):
            br = None
            if present[i]:
                br = cast("Tuple[Branch, Branch, Branch, Branch]",
                          tuple(float(values[i, k]) if legal[i] >> k & 1 else None for k in range(4)))
            out.append(StepV2(int(boards[i]), int(moves[i]), br))
        return out

    # Pickled as its v2 bytes (lossless: every field of a RunV2 is in them);
    # a run decoded from a v1 file comes back with source_kind "v2".
    def __reduce__(self) -> Tuple[Callable[[bytes], "RunV2"], Tuple[bytes]]:
        return (_run_from_bytes, (self.to_bytes("v2"),))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunV2):
            return NotImplemented
        return self.to_bytes() == other.to_bytes()

    def __repr__(self) -> str:
        m = self.meta
        return (f"RunV2(steps={len(self)}, max_score={m.max_score}, "
                f"highest_tile={m.highest_tile}, engine={m.engine_str!r})")


def _run_from_bytes(data: bytes) -> RunV2:
    return RunV2.from_bytes(data)


def _meta_to_c(meta: Meta) -> Tuple[Any, Any]:
    """The cffi `a2pack_run_meta *` and the buffer its engine string points into."""
    m = ffi.new("a2pack_run_meta *")
    m.size = ffi.sizeof("a2pack_run_meta")
    m.steps = meta.steps
    m.start_unix_s = meta.start_unix_s
    m.elapsed_s = meta.elapsed_s
    m.max_score = meta.max_score
    m.highest_tile = meta.highest_tile
    keep = None
    if meta.engine_str is not None:
        keep = ffi.new("char[]", meta.engine_str.encode("utf-8"))
        m.has_engine = 1
        m.engine = keep
        m.engine_len = len(meta.engine_str.encode("utf-8"))
    return (m, keep)


class RunBatch:
    """Many runs decoded into flat columns. Every array is a read-only numpy
    view of library memory, valid (and keeping the batch alive) as long as the
    array exists."""

    _STEP_FIELDS: ClassVar[Tuple[Tuple[str, str, "npt.DTypeLike", int], ...]] = (("boards", "boards", np.uint64, 1), ("moves", "moves", np.uint8, 1),
                    ("branch_values", "branch_values", np.float32, 4),
                    ("legal_masks", "legal_masks", np.uint8, 1),
                    ("branch_present", "branch_present", np.uint8, 1))
    _RUN_FIELDS: ClassVar[Tuple[Tuple[str, "npt.DTypeLike"], ...]] = (("final_boards", np.uint64), ("meta_steps", np.uint32),
                   ("start_unix_s", np.uint64), ("elapsed_s", np.float32),
                   ("max_score", np.uint64), ("highest_tile", np.uint32),
                   ("source_kind", np.uint8), ("has_engine", np.uint8))

    # The columns, set from _STEP_FIELDS and _RUN_FIELDS in __init__.
    boards: "npt.NDArray[np.uint64]"
    moves: "npt.NDArray[np.uint8]"
    branch_values: "npt.NDArray[np.float32]"
    legal_masks: "npt.NDArray[np.uint8]"
    branch_present: "npt.NDArray[np.uint8]"
    final_boards: "npt.NDArray[np.uint64]"
    meta_steps: "npt.NDArray[np.uint32]"
    start_unix_s: "npt.NDArray[np.uint64]"
    elapsed_s: "npt.NDArray[np.float32]"
    max_score: "npt.NDArray[np.uint64]"
    highest_tile: "npt.NDArray[np.uint32]"
    source_kind: "npt.NDArray[np.uint8]"
    has_engine: "npt.NDArray[np.uint8]"

    def __init__(self, handle: Any) -> None:
        self._h = ffi.gc(handle, lib.a2pack_run_batch_close)
        c = ffi.new("a2pack_run_columns *")
        c.size = ffi.sizeof("a2pack_run_columns")
        check(lib.a2pack_run_batch_columns(self._h, c))
        self.n_runs = int(c.n_runs)
        self.n_steps = int(c.n_steps)
        self.payload_bytes = int(lib.a2pack_run_batch_payload_bytes(self._h))
        self.step_offsets = view_array(self, c.step_offsets, self.n_runs + 1, np.uint64)
        for name, cname, dt, width in self._STEP_FIELDS:
            shape = (self.n_steps, width) if width > 1 else (self.n_steps,)
            setattr(self, name, view_array(self, getattr(c, cname), shape, dt))
        for name, dt in self._RUN_FIELDS:
            setattr(self, name, view_array(self, getattr(c, name), self.n_runs, dt))
        self.engine_offsets = view_array(self, c.engine_offsets, self.n_runs + 1, np.uint64)
        self._engine_bytes = bytes(ffi.buffer(c.engine_bytes, int(self.engine_offsets[-1]))) \
            if self.n_runs else b""

    def __len__(self) -> int:
        return self.n_runs

    def engine(self, r: int) -> Optional[str]:
        if not self.has_engine[r]:
            return None
        a, b = int(self.engine_offsets[r]), int(self.engine_offsets[r + 1])
        return self._engine_bytes[a:b].decode("utf-8")

    def steps_mismatch(self) -> "npt.NDArray[np.intp]":
        """Runs (batch positions) whose ``meta_steps`` differs from the steps
        they store (see StepsMismatchWarning); empty for consistent runs."""
        return np.flatnonzero(self.meta_steps != np.diff(self.step_offsets))

    def run_steps(self, r: int) -> slice:
        """The slice of the step columns that belongs to run r."""
        return slice(int(self.step_offsets[r]), int(self.step_offsets[r + 1]))

    def columns(self) -> "Dict[str, npt.NDArray[Any]]":
        """Every column by name (numpy views)."""
        names = [f[0] for f in self._STEP_FIELDS] + [f[0] for f in self._RUN_FIELDS]
        d: "Dict[str, npt.NDArray[Any]]" = {n: getattr(self, n) for n in names}
        d["step_offsets"] = self.step_offsets
        return d


def decode_batch(payloads: Sequence[bytes], workers: int = 0) -> RunBatch:
    """Decode many run payloads (v1 or v2) into one columnar batch, in parallel."""
    n = len(payloads)
    bufs = [ffi.from_buffer(p) for p in payloads]
    ptrs = ffi.new("uint8_t *[]", bufs) if n else ffi.NULL
    lens = ffi.new("size_t[]", [len(p) for p in payloads]) if n else ffi.NULL
    out = ffi.new("a2pack_run_batch **")
    check(lib.a2pack_run_batch_decode(ffi.cast("const uint8_t * const *", ptrs), lens, n,
                                      workers, out))
    del bufs
    return RunBatch(out[0])


def load_batch(paths: "Sequence[Union[str, os.PathLike[str]]]", workers: int = 0) -> RunBatch:
    """Read run files (v1 or v2 each) and decode them into one columnar batch.

    The library's workers read and decode the files in parallel; an unreadable
    or corrupt file raises, naming its path. ``RunBatch.payload_bytes`` is the
    total size of the files. For a large folder, call it on windows of a few
    hundred files to bound memory.
    """
    n = len(paths)
    keep = [ffi.new("char[]", fspath(p)) for p in paths]
    arr = ffi.new("char *[]", keep) if n else ffi.NULL
    out = ffi.new("a2pack_run_batch **")
    check(lib.a2pack_run_batch_load(ffi.cast("const char * const *", arr), n, workers, out))
    del keep
    return RunBatch(out[0])
