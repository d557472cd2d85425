"""Expectimax: upstream's single-threaded search, run by liba2pack
(a2pack_expectimax_*), whose values are bit-identical to upstream's."""

from typing import Any, List, Optional

from ._board import Board, Move, _MOVES
from ._lib import f32, native, u64


def _board_raw(board: Any) -> int:
    if not isinstance(board, Board):
        raise TypeError(f"argument 'board': '{type(board).__name__}' object cannot be converted "
                        f"to 'Board'")
    return board.raw


class ExpectimaxConfig:
    """Search knobs; the defaults are upstream's (prob_cutoff 1e-4 as a
    float32, no depth cap, cache on)."""

    __slots__ = ("_prob_cutoff", "_depth_cap", "_cache_enabled")

    def __init__(self) -> None:
        self._prob_cutoff = f32(1e-4)
        self._depth_cap: Optional[int] = None
        self._cache_enabled = True

    @property
    def prob_cutoff(self) -> float:
        return self._prob_cutoff

    @prob_cutoff.setter
    def prob_cutoff(self, v: float) -> None:
        self._prob_cutoff = f32(v)

    @property
    def depth_cap(self) -> Optional[int]:
        return self._depth_cap

    @depth_cap.setter
    def depth_cap(self, v: Optional[int]) -> None:
        self._depth_cap = None if v is None else u64(v, "depth_cap")

    @property
    def cache_enabled(self) -> bool:
        return self._cache_enabled

    @cache_enabled.setter
    def cache_enabled(self, v: bool) -> None:
        if not isinstance(v, bool):
            raise TypeError(f"'{type(v).__name__}' object cannot be converted to 'PyBool'")
        self._cache_enabled = v

    def __repr__(self) -> str:
        return (f"ExpectimaxConfig(prob_cutoff={self._prob_cutoff!r}, "
                f"depth_cap={self._depth_cap!r}, cache_enabled={self._cache_enabled!r})")


class SearchStats:
    """Nodes visited by the last search, and the most of any since the last
    reset_stats()."""

    __slots__ = ("nodes", "peak_nodes")

    def __init__(self, nodes: int, peak_nodes: int) -> None:
        self.nodes = nodes
        self.peak_nodes = peak_nodes

    def __repr__(self) -> str:
        return f"SearchStats(nodes={self.nodes}, peak_nodes={self.peak_nodes})"


class BranchEval:
    """The raw value of one root move: direction, expected_value, is_legal."""

    __slots__ = ("_direction", "_ev", "_legal")
    _direction: Move
    _ev: float
    _legal: bool

    def __new__(cls, *args: Any, **kwargs: Any) -> "BranchEval":
        raise TypeError("No constructor defined for BranchEval")

    @classmethod
    def _make(cls, direction: Move, ev: float, legal: bool) -> "BranchEval":
        b = object.__new__(cls)
        b._direction, b._ev, b._legal = direction, ev, legal
        return b

    direction = property(lambda self: self._direction)
    expected_value = property(lambda self: self._ev)
    is_legal = property(lambda self: self._legal)

    def __repr__(self) -> str:
        return (f"BranchEval(direction={self._direction!r}, expected_value={self._ev!r}, "
                f"is_legal={self._legal!r})")


class Expectimax:
    """Upstream's expectimax: depth max(3, distinct tiles - 2), chance nodes
    over every empty cell x {2: 0.9, 4: 0.1}, probability pruning and a
    per-call transposition cache. Runs without the GIL."""

    __slots__ = ("_h",)

    def __init__(self, config: Optional[ExpectimaxConfig] = None) -> None:
        if config is not None and not isinstance(config, ExpectimaxConfig):
            raise TypeError(f"argument 'config': '{type(config).__name__}' object cannot be "
                            f"converted to 'ExpectimaxConfig'")
        n = native()
        o = n.ffi.new("a2pack_expectimax_options *")
        n.lib.a2pack_expectimax_options_init(o)
        if config is not None:
            o.prob_cutoff = config.prob_cutoff
            o.has_depth_cap = 0 if config.depth_cap is None else 1
            o.depth_cap = config.depth_cap or 0
            o.cache_enabled = 1 if config.cache_enabled else 0
        out = n.ffi.new("a2pack_expectimax **")
        n.check(n.lib.a2pack_expectimax_open(o, out))
        self._h = n.ffi.gc(out[0], n.lib.a2pack_expectimax_close)

    def best_move(self, board: Board) -> Optional[Move]:
        """The move with the highest value, or None when no move is legal."""
        n = native()
        out = n.ffi.new("int32_t *")
        n.check(n.lib.a2pack_expectimax_best_move(self._h, _board_raw(board), out))
        return None if out[0] < 0 else _MOVES[out[0]]

    def branch_evals(self, board: Board) -> List[BranchEval]:
        """Raw value of each move, in order [Up, Down, Left, Right]; an
        illegal move has expected_value 0.0 and is_legal False."""
        n = native()
        ev = n.ffi.new("double[4]")
        mask = n.ffi.new("uint32_t *")
        n.check(n.lib.a2pack_expectimax_branch_evals(self._h, _board_raw(board), ev, mask))
        return [BranchEval._make(_MOVES[i], float(ev[i]), bool(mask[0] >> i & 1))
                for i in range(4)]

    def state_value(self, board: Board) -> float:
        """Value of the board's best move (0.0 when none is legal)."""
        n = native()
        out = n.ffi.new("double *")
        n.check(n.lib.a2pack_expectimax_state_value(self._h, _board_raw(board), out))
        return float(out[0])

    def last_stats(self) -> SearchStats:
        n = native()
        nodes = n.ffi.new("uint64_t *")
        peak = n.ffi.new("uint64_t *")
        n.lib.a2pack_expectimax_stats(self._h, nodes, peak)
        return SearchStats(int(nodes[0]), int(peak[0]))

    def reset_stats(self) -> None:
        native().lib.a2pack_expectimax_reset_stats(self._h)
