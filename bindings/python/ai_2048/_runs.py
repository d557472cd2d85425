"""Meta, BranchV2, StepV2, RunV2 and normalize_branches_py with upstream's
constructors and properties. A RunV2 holds an a2pack.RunV2 (the run in
liba2pack); encoding, decoding and files are a2pack's, and a2pack writes the
bytes upstream writes."""

from typing import Any, List, Optional, Sequence, Tuple

from . import _errors
from ._board import Board, Move, _MOVES, move_index
from ._lib import f32, native, unsigned, u64

_SER = "serialization error"


class Meta:
    """Run metadata: steps (u32), start_unix_s (u64), elapsed_s (float32),
    max_score (u64), highest_tile (u32), engine_str (str or None)."""

    __slots__ = ("_steps", "_start", "_elapsed", "_max_score", "_highest", "_engine")

    def __init__(self, steps: int, start_unix_s: int, elapsed_s: float, max_score: int,
                 highest_tile: int, engine_str: Optional[str] = None) -> None:
        self._steps = unsigned(steps, 32, "steps")
        self._start = u64(start_unix_s, "start_unix_s")
        self._elapsed = f32(elapsed_s)
        self._max_score = u64(max_score, "max_score")
        self._highest = unsigned(highest_tile, 32, "highest_tile")
        if engine_str is not None and not isinstance(engine_str, str):
            raise TypeError(f"argument 'engine_str': '{type(engine_str).__name__}' object cannot "
                            f"be converted to 'PyString'")
        self._engine = engine_str

    steps = property(lambda self: self._steps)
    start_unix_s = property(lambda self: self._start)
    elapsed_s = property(lambda self: self._elapsed)
    max_score = property(lambda self: self._max_score)
    highest_tile = property(lambda self: self._highest)
    engine_str = property(lambda self: self._engine)

    def __repr__(self) -> str:
        return (f"Meta(steps={self._steps}, start_unix_s={self._start}, elapsed_s={self._elapsed}, "
                f"max_score={self._max_score}, highest_tile={self._highest}, "
                f"engine_str={self._engine!r})")


class BranchV2:
    """One move's stored value: BranchV2.legal(value) (a float32) or
    BranchV2.illegal()."""

    __slots__ = ("_value",)
    _value: Optional[float]

    def __new__(cls, *args: Any, **kwargs: Any) -> "BranchV2":
        raise TypeError("No constructor defined for BranchV2")

    @classmethod
    def _of(cls, value: Optional[float]) -> "BranchV2":
        b = object.__new__(cls)
        b._value = value
        return b

    @staticmethod
    def legal(value: float) -> "BranchV2":
        return BranchV2._of(f32(value))

    @staticmethod
    def illegal() -> "BranchV2":
        return _ILLEGAL

    @property
    def is_legal(self) -> bool:
        return self._value is not None

    @property
    def value(self) -> Optional[float]:
        return self._value

    def __repr__(self) -> str:
        return "BranchV2.illegal()" if self._value is None else f"BranchV2.legal({self._value:.6f})"


_ILLEGAL = BranchV2._of(None)


def _branch(b: Any) -> BranchV2:
    if not isinstance(b, BranchV2):
        raise TypeError(f"'{type(b).__name__}' object cannot be converted to 'BranchV2'")
    return b


def _seq(v: Any, what: str) -> List[Any]:
    if isinstance(v, str):
        raise TypeError(f"argument '{what}': Can't extract `str` to `Vec`")
    try:
        return list(v)
    except TypeError:
        raise TypeError(f"argument '{what}': '{type(v).__name__}' object cannot be converted to "
                        f"'Sequence'") from None


class StepV2:
    """One step: the board before it, the chosen Move and, optionally, the
    four branches [Up, Down, Left, Right] (fewer are padded with illegal
    ones, more are cut to four, as upstream does)."""

    __slots__ = ("_pre", "_chosen", "_branches")

    def __init__(self, pre_board_raw: int, chosen: Move,
                 branches: Optional[Sequence[BranchV2]] = None) -> None:
        self._pre = u64(pre_board_raw, "pre_board_raw")
        self._chosen = move_index(chosen, "chosen")
        if branches is None:
            self._branches: Optional[Tuple[BranchV2, ...]] = None
        else:
            got = [_branch(b) for b in _seq(branches, "branches")][:4]
            self._branches = tuple(got + [_ILLEGAL] * (4 - len(got)))

    @classmethod
    def _make(cls, pre: int, chosen: int, branches: Optional[Tuple[BranchV2, ...]]) -> "StepV2":
        s = object.__new__(cls)
        s._pre, s._chosen, s._branches = pre, chosen, branches
        return s

    pre_board_raw = property(lambda self: self._pre)
    pre_board = property(lambda self: Board._of(self._pre))
    chosen = property(lambda self: _MOVES[self._chosen])

    @property
    def branches(self) -> Optional[List[BranchV2]]:
        return None if self._branches is None else list(self._branches)

    def __repr__(self) -> str:
        return f"StepV2({self._pre:#018x}, {_MOVES[self._chosen]!r}, {self.branches!r})"


def _meta_to_a2pack(meta: Meta) -> Any:
    from a2pack.run import Meta as A2Meta  # noqa: PLC0415 - lazy: keeps the import cheap
    return A2Meta(meta.steps, meta.start_unix_s, meta.elapsed_s, meta.max_score,
                  meta.highest_tile, meta.engine_str)


class RunV2:
    """A v2 run: RunV2(meta, steps, final_board_raw), or RunV2.load(path) /
    RunV2.from_bytes(data) (v1 files are upgraded). Errors are RuntimeError
    ("serialization error: ..."), subclassing the a2pack error too."""

    __slots__ = ("_run",)

    def __init__(self, meta: Meta, steps: Sequence[StepV2], final_board_raw: int) -> None:
        if not isinstance(meta, Meta):
            raise TypeError(f"argument 'meta': '{type(meta).__name__}' object cannot be converted "
                            f"to 'Meta'")
        items = _seq(steps, "steps")
        for s in items:
            if not isinstance(s, StepV2):
                raise TypeError(f"argument 'steps': '{type(s).__name__}' object cannot be "
                                f"converted to 'StepV2'")
        final = u64(final_board_raw, "final_board_raw")
        import numpy as np  # noqa: PLC0415
        from a2pack.run import RunV2 as A2Run  # noqa: PLC0415
        n = len(items)
        boards = np.fromiter((s._pre for s in items), dtype=np.uint64, count=n)
        moves = np.fromiter((s._chosen for s in items), dtype=np.uint8, count=n)
        values = legal = present = None
        if any(s._branches is not None for s in items):
            values = np.zeros((n, 4), dtype=np.float32)
            legal = np.zeros(n, dtype=np.uint8)
            present = np.zeros(n, dtype=np.uint8)
            for i, s in enumerate(items):
                if s._branches is None:
                    continue
                present[i] = 1
                for k, b in enumerate(s._branches):
                    if b._value is not None:
                        legal[i] |= 1 << k
                        values[i, k] = b._value
        self._run = _errors.call(_SER, A2Run.from_arrays, _meta_to_a2pack(meta), boards, moves,
                                 values, legal, present, final)

    @classmethod
    def _wrap(cls, run: Any) -> "RunV2":
        r = object.__new__(cls)
        r._run = run
        return r

    @property
    def a2pack(self) -> Any:
        """The a2pack.RunV2 behind this run (numpy step columns and more)."""
        return self._run

    @property
    def meta(self) -> Meta:
        m = self._run.meta
        return Meta(m.steps, m.start_unix_s, m.elapsed_s, m.max_score, m.highest_tile, m.engine_str)

    @property
    def steps(self) -> List[StepV2]:
        r = self._run
        boards, moves = r.boards.tolist(), r.moves.tolist()
        if not r.has_branches:
            return [StepV2._make(b, m, None) for b, m in zip(boards, moves)]
        values, legal, present = r.branch_values.tolist(), r.legal_masks.tolist(), \
            r.branch_present.tolist()
        out = []
        for b, m, v, lm, p in zip(boards, moves, values, legal, present):
            br = tuple(BranchV2._of(v[k]) if lm >> k & 1 else _ILLEGAL for k in range(4)) \
                if p else None
            out.append(StepV2._make(b, m, br))
        return out

    @property
    def final_board_raw(self) -> int:
        return int(self._run.final_board)

    @property
    def final_board(self) -> Board:
        return Board._of(int(self._run.final_board))

    def to_bytes(self) -> bytes:
        return _errors.call(_SER, self._run.to_bytes)

    @staticmethod
    def from_bytes(data: bytes) -> "RunV2":
        if not isinstance(data, bytes):
            raise TypeError(f"argument 'data': '{type(data).__name__}' object cannot be converted "
                            f"to 'PyBytes'")
        native()
        from a2pack.run import RunV2 as A2Run  # noqa: PLC0415
        return RunV2._wrap(_errors.call(_SER, A2Run.from_bytes, data))

    def save(self, path: Any) -> None:
        _errors.call(_SER, self._run.save, path)

    @staticmethod
    def load(path: Any) -> "RunV2":
        native()
        from a2pack.run import RunV2 as A2Run  # noqa: PLC0415
        return RunV2._wrap(_errors.call(_SER, A2Run.load, path))

    def __repr__(self) -> str:
        m = self._run.meta
        return f"RunV2(steps={m.steps}, final_board={self.final_board_raw:#018x})"


def normalize_branches_py(evals: Sequence[Any]) -> List[BranchV2]:
    """Upstream's normalisation of four BranchEval (in order Up, Down, Left,
    Right; their direction is not read) into BranchV2 values in [0, 1)."""
    from ._search import BranchEval  # noqa: PLC0415
    items = _seq(evals, "evals")
    for e in items:
        if not isinstance(e, BranchEval):
            raise TypeError(f"argument 'evals': '{type(e).__name__}' object cannot be converted "
                            f"to 'BranchEval'")
    if len(items) != 4:
        raise ValueError("expected 4 branch evals (Up, Down, Left, Right)")
    n = native()
    ev = n.ffi.new("double[4]", [float(e.expected_value) for e in items])
    mask = sum(1 << i for i, e in enumerate(items) if e.is_legal)
    out = n.ffi.new("float[4]")
    n.lib.a2pack_branches_normalise_f64(ev, mask, out)
    return [BranchV2._of(float(out[i])) if mask >> i & 1 else _ILLEGAL for i in range(4)]
