"""PackReader, PackStats and PackView with upstream's methods, on
a2pack.PackReader: reading, decoding and JSONL export are a2pack's, and
shuffled orders come from a2pack's copy of upstream's random stream, so the
same seed gives the same order as upstream."""

from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar

from . import _errors
from ._lib import native, u64
from ._runs import RunV2, BranchV2, _ILLEGAL

_PACK = "pack error"
T = TypeVar("T")
# Upstream's "near 1" test for the chosen branch: 1.0f32 - 1e-6f32.
_NEAR_ONE = 0.9999989867210388
# One step batch: (pre_boards, chosen_dirs, branch_evs).
StepBatch = Tuple[List[List[int]], List[int], List[List[BranchV2]]]


def _permute(items: List[T], seed: Optional[int]) -> List[T]:
    """items shuffled as upstream's `slice.shuffle(&mut StdRng::seed_from_u64(seed or 0))`."""
    if len(items) < 2:
        return list(items)
    import numpy as np  # noqa: PLC0415
    n = native()
    r = n.ffi.new("a2pack_stdrng **")
    n.check(n.lib.a2pack_stdrng_open(u64(seed or 0, "seed"), r))
    rng = n.ffi.gc(r[0], n.lib.a2pack_stdrng_close)
    order = np.arange(len(items), dtype=np.uint64)
    n.check(n.lib.a2pack_stdrng_shuffle(rng, n.ffi.from_buffer("uint64_t[]", order), len(items)))
    return [items[i] for i in order.tolist()]


def _batch_size(batch_size: Any) -> int:
    b = u64(batch_size, "batch_size")
    if b < 1:
        # Upstream loops forever on 0; a2pack refuses it.
        raise ValueError("batch_size must be at least 1")
    return b


class PackStats:
    """Run-length statistics of a pack (upstream's fields)."""

    __slots__ = ("count", "total_steps", "min_len", "max_len", "mean_len", "p50", "p90", "p99")

    def __init__(self, s: Any) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(s, name))

    def __repr__(self) -> str:
        return ("PackStats(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")")


class _Source:
    """Decoding runs of one a2pack reader as upstream types and step rows."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader

    def decode_batch(self, indices: Sequence[int]) -> List[RunV2]:
        if not indices:
            return []
        runs: List[Any] = _errors.call(_PACK, self.reader.decode_batch, list(indices))
        return [RunV2._wrap(r) for r in runs]

    def meta_steps(self, runs: Sequence[int]) -> List[int]:
        """meta.steps of each run (upstream decodes every run for it, too)."""
        out: List[int] = []
        for start in range(0, len(runs), 256):
            chunk = list(runs[start:start + 256])
            cols = _errors.call(_PACK, self.reader.decode_batch_columns, chunk)
            out.extend(cols.meta_steps.tolist())
        return out

    def columns(self, runs: Sequence[int]) -> Any:
        return _errors.call(_PACK, self.reader.decode_batch_columns, list(runs))


def _rows(cols: Any, rows: Any) -> StepBatch:
    """Upstream's step-batch triple for the given rows of a RunBatch:
    16 exponents per board, the chosen move 0..3, and four BranchV2 with the
    chosen one set to exactly 1.0 when near 1 (Legal(1.0) alone when the step
    stores no branches)."""
    import numpy as np  # noqa: PLC0415
    boards = cols.boards[rows]
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    exps = ((boards[:, None] >> shifts) & np.uint64(0xF)).astype(np.uint8).tolist()
    dirs = cols.moves[rows].tolist()
    values = cols.branch_values[rows].tolist()
    legal = cols.legal_masks[rows].tolist()
    present = cols.branch_present[rows].tolist()
    branches: List[List[BranchV2]] = []
    for d, v, lm, p in zip(dirs, values, legal, present):
        if p:
            row = [BranchV2._of(v[k]) if lm >> k & 1 else _ILLEGAL for k in range(4)]
            if lm >> d & 1 and v[d] > _NEAR_ONE:
                row[d] = BranchV2._of(1.0)
        else:
            row = [_ILLEGAL] * 4
            row[d] = BranchV2._of(1.0)
        branches.append(row)
    return exps, dirs, branches


def _step_batches(src: _Source, runs: List[int], batch_size: int, shuffle: bool,
                  seed: Optional[int]) -> Iterator[StepBatch]:
    import numpy as np  # noqa: PLC0415
    if not shuffle:
        # Runs in order, every stored step, batches spanning runs.
        pending: List[Tuple[Any, Any]] = []
        have = 0
        for start in range(0, len(runs), 64):
            cols = src.columns(runs[start:start + 64])
            n = int(cols.n_steps)
            pos = 0
            while pos < n:
                take = min(batch_size - have, n - pos)
                pending.append((cols, np.arange(pos, pos + take)))
                have += take
                pos += take
                if have == batch_size:
                    yield _join([_rows(c, r) for c, r in pending])
                    pending, have = [], 0
        if have:
            yield _join([_rows(c, r) for c, r in pending])
        return
    # Shuffled: every (run, step) pair by meta.steps, permuted as upstream.
    steps = src.meta_steps(runs)
    pairs = _permute([(ri, si) for ri, s in zip(runs, steps) for si in range(s)], seed)
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        uniq = sorted({ri for ri, _ in chunk})
        cols = src.columns(uniq)
        offsets = cols.step_offsets.tolist()
        where = {ri: k for k, ri in enumerate(uniq)}
        rows = []
        for ri, si in chunk:
            k = where[ri]
            if offsets[k] + si >= offsets[k + 1]:
                raise _errors.error_class(_pack_error())(
                    f"{_PACK}: entry {ri}: meta.steps counts step {si} but the run stores "
                    f"{offsets[k + 1] - offsets[k]} steps")
            rows.append(offsets[k] + si)
        yield _rows(cols, np.array(rows, dtype=np.intp))


def _pack_error() -> type:
    from a2pack.errors import CorruptError  # noqa: PLC0415
    return CorruptError


def _join(parts: List[StepBatch]) -> StepBatch:
    if len(parts) == 1:
        return parts[0]
    a: List[List[int]] = []
    b: List[int] = []
    c: List[List[BranchV2]] = []
    for x, y, z in parts:
        a += x
        b += y
        c += z
    return a, b, c


def _run_batches(src: _Source, order: List[int], batch_size: int) -> Iterator[List[RunV2]]:
    for start in range(0, len(order), batch_size):
        yield src.decode_batch(order[start:start + batch_size])


def _iter_runs(src: _Source, indices: List[int]) -> Iterator[RunV2]:
    for start in range(0, len(indices), 64):
        yield from src.decode_batch(indices[start:start + 64])


def _indices(indices: Iterable[Any], what: str = "indices") -> List[int]:
    if isinstance(indices, str):
        raise TypeError(f"argument '{what}': Can't extract `str` to `Vec`")
    return [u64(i, what) for i in indices]


class PackView:
    """A subset of a pack's runs (from PackReader.split)."""

    __slots__ = ("_src", "_runs", "_by_runs")

    def __init__(self, src: _Source, runs: List[int], by_runs: bool) -> None:
        self._src, self._runs, self._by_runs = src, runs, by_runs

    def __len__(self) -> int:
        return len(self._runs)

    def indices(self) -> List[int]:
        """The run indices backing this view."""
        return list(self._runs)

    def iter(self) -> Iterator[RunV2]:
        return _iter_runs(self._src, self._runs)

    def iter_batches(self, batch_size: int, shuffle: Optional[bool] = None,
                     seed: Optional[int] = None) -> Iterator[List[RunV2]]:
        b = _batch_size(batch_size)
        order = _permute(self._runs, seed) if shuffle else list(self._runs)
        return _run_batches(self._src, order, b)

    def iter_step_batches(self, batch_size: int, shuffle: Optional[bool] = None,
                          seed: Optional[int] = None) -> Iterator[StepBatch]:
        return _step_batches(self._src, self._runs, _batch_size(batch_size), bool(shuffle), seed)


class PackReader:
    """A packfile (.a2pack), opened with PackReader.open(path). Errors are
    RuntimeError ("pack error: ..."), subclassing the a2pack error too. The
    a2pack reader behind it is `reader.a2pack` (numpy columns, verify,
    workers and the rest of a2pack's options)."""

    __slots__ = ("_src",)
    _src: _Source

    def __new__(cls, *args: Any, **kwargs: Any) -> "PackReader":
        raise TypeError("No constructor defined for PackReader; use PackReader.open(path)")

    @staticmethod
    def open(path: Any) -> "PackReader":
        native()
        from a2pack.pack import PackReader as A2Reader  # noqa: PLC0415
        r = object.__new__(PackReader)
        r._src = _Source(_errors.call(_PACK, A2Reader, path))
        return r

    @property
    def a2pack(self) -> Any:
        return self._src.reader

    def __len__(self) -> int:
        return len(self._src.reader)

    def kind(self, i: int) -> str:
        kind: str = _errors.call(_PACK, self._src.reader.kind, u64(i, "i"))
        return kind

    def decode(self, i: int) -> RunV2:
        return RunV2._wrap(_errors.call(_PACK, self._src.reader.decode, u64(i, "i")))

    def decode_batch(self, indices: Sequence[int]) -> List[RunV2]:
        return self._src.decode_batch(_indices(indices))

    def to_jsonl(self, path: Any, parallel: Optional[bool] = None, by_step: Optional[bool] = None,
                 progress: Optional[bool] = None, **a2pack_options: Any) -> None:
        """Every run (by_step=False) or every step (by_step=True) as JSON
        lines, byte for byte as upstream writes them. `progress` is accepted
        and ignored (no progress bar); a2pack's own keywords (workers,
        verify, durable) pass through."""
        _errors.call(_PACK, self._src.reader.to_jsonl, path,
                     parallel=True if parallel is None else bool(parallel),
                     mode="steps" if by_step else "runs", **a2pack_options)

    @property
    def stats(self) -> PackStats:
        return PackStats(_errors.call(_PACK, lambda: self._src.reader.stats))

    def iter(self) -> Iterator[RunV2]:
        return _iter_runs(self._src, list(range(len(self))))

    def __iter__(self) -> Iterator[RunV2]:  # a2pack's addition: `for run in reader`
        return self.iter()

    def iter_indices(self, indices: Sequence[int]) -> Iterator[RunV2]:
        return _iter_runs(self._src, _indices(indices))

    def iter_batches(self, batch_size: int, shuffle: Optional[bool] = None,
                     seed: Optional[int] = None) -> Iterator[List[RunV2]]:
        """Runs in batches of batch_size (the last may be short), in pack order
        or shuffled by seed (default 0) exactly as upstream shuffles."""
        b = _batch_size(batch_size)
        order = list(range(len(self)))
        if shuffle:
            order = _permute(order, seed)
        return _run_batches(self._src, order, b)

    def iter_step_batches(self, batch_size: int, shuffle: Optional[bool] = None,
                          seed: Optional[int] = None) -> Iterator[StepBatch]:
        """Step-level batches (pre_boards, chosen_dirs, branch_evs): 16
        exponents per board, moves 0..3, and four BranchV2 per step with the
        chosen move at exactly 1.0 when it is (near) the maximum. Unshuffled:
        runs in order; shuffled: all (run, step) pairs in upstream's order."""
        return _step_batches(self._src, list(range(len(self))), _batch_size(batch_size),
                             bool(shuffle), seed)

    def split(self, unit: Optional[str] = None, test_pct: Optional[float] = None,
              test_size: Optional[int] = None, seed: Optional[int] = None,
              order: Optional[str] = None) -> Tuple[PackView, PackView]:
        """Deterministic (train, test) views, as upstream splits: by runs
        (unit="run") or by at least test_size / test_pct of the steps in whole
        runs (unit="step"), after shuffling the runs by seed (order="random")
        or not (order="sequential")."""
        unit = unit or "run"
        if unit not in ("run", "step"):
            raise ValueError("unit must be 'run' or 'step'")
        if test_pct is not None and test_size is not None:
            raise ValueError("provide only one of test_pct or test_size")
        if test_pct is None and test_size is None:
            raise ValueError("must provide test_pct or test_size")
        if test_pct is not None and not 0.0 < test_pct < 1.0:
            raise ValueError("test_pct must be in (0,1)")
        order = order or "random"
        if order not in ("random", "sequential"):
            raise ValueError("order must be 'random' or 'sequential'")
        n = len(self)
        idxs = list(range(n))
        if order == "random":
            idxs = _permute(idxs, seed)
        if unit == "run":
            if test_pct is not None:
                target = max(int(test_pct * n), 1)
            else:
                target = u64(test_size, "test_size")
            test = idxs[:min(target, n)]
        else:
            steps: Dict[int, int] = {}

            def steps_of(i: int) -> int:
                if i not in steps:
                    steps[i] = self._src.meta_steps([i])[0]
                return steps[i]

            if test_pct is not None:
                all_steps = dict(zip(idxs, self._src.meta_steps(idxs)))
                steps.update(all_steps)
                target = max(int(test_pct * sum(all_steps.values())), 1)
            else:
                target = max(u64(test_size, "test_size"), 1)
            test, acc = [], 0
            for i in idxs:
                test.append(i)
                acc += steps_of(i)
                if acc >= target:
                    break
        chosen = set(test)
        train = [i for i in range(n) if i not in chosen]
        by_runs = unit == "run"
        return PackView(self._src, train, by_runs), PackView(self._src, test, by_runs)

    def __repr__(self) -> str:
        return f"ai_2048.PackReader({self._src.reader.path!r}, runs={len(self)})"
