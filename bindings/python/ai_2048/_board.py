"""Move, Rng and Board: upstream's game surface on a2pack's engine.

Moves and scores are a2pack's C functions (a2pack_board_*); the random tile
comes from a2pack's copy of upstream's random stream (a2pack_stdrng_*), so a
seed gives the boards upstream gives. Only the packed-u64 layout is read
here (cell i is nibble 60 - 4*i), as every a2pack binding does.
"""

import os
from typing import Any, Iterator, List, Optional

from ._lib import native, u64

_NAMES = ("UP", "DOWN", "LEFT", "RIGHT")


class Move:
    """A direction to move/merge tiles: Move.UP, Move.DOWN, Move.LEFT,
    Move.RIGHT (0..3 in a2pack's C API and in step batches)."""

    __slots__ = ("_v",)
    _v: int
    UP: "Move"
    DOWN: "Move"
    LEFT: "Move"
    RIGHT: "Move"

    def __new__(cls, *args: Any, **kwargs: Any) -> "Move":
        raise TypeError("No constructor defined for Move")

    @classmethod
    def _make(cls, v: int) -> "Move":
        m = object.__new__(cls)
        object.__setattr__(m, "_v", v)
        return m

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"'Move' object attribute '{name}' is read-only")

    def __repr__(self) -> str:
        return f"Move.{_NAMES[self._v]}"

    def __str__(self) -> str:
        return _NAMES[self._v]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Move):
            return NotImplemented
        return self._v == other._v

    def __hash__(self) -> int:
        return self._v

    def __reduce__(self) -> Any:
        return (_move, (self._v,))


_MOVES = tuple(Move._make(i) for i in range(4))
Move.UP, Move.DOWN, Move.LEFT, Move.RIGHT = _MOVES


def _move(v: int) -> Move:
    return _MOVES[v]


def move_index(direction: Any, what: str = "direction") -> int:
    if not isinstance(direction, Move):
        raise TypeError(f"argument '{what}': '{type(direction).__name__}' object cannot be "
                        f"converted to 'Move'")
    return direction._v


class Rng:
    """Upstream's deterministic random source (Rust StdRng seeded with
    seed_from_u64), implemented by liba2pack: Rng(42) gives the tiles
    upstream's Rng(42) gives."""

    __slots__ = ("_h",)

    def __init__(self, seed: int) -> None:
        n = native()
        out = n.ffi.new("a2pack_stdrng **")
        n.check(n.lib.a2pack_stdrng_open(u64(seed, "seed"), out))
        self._h = n.ffi.gc(out[0], n.lib.a2pack_stdrng_close)

    def clone(self) -> "Rng":
        """An independent copy that continues the same stream."""
        n = native()
        out = n.ffi.new("a2pack_stdrng **")
        n.check(n.lib.a2pack_stdrng_clone(self._h, out))
        r = object.__new__(Rng)
        r._h = n.ffi.gc(out[0], n.lib.a2pack_stdrng_close)
        return r


def _rng_for(rng: Optional[Rng], seed: Optional[int]) -> Rng:
    if rng is not None:
        if not isinstance(rng, Rng):
            raise TypeError(f"argument 'rng': '{type(rng).__name__}' object cannot be converted "
                            f"to 'Rng'")
        return rng
    if seed is not None:
        return Rng(seed)
    # Upstream draws from its thread RNG here: any fresh seed will do.
    return Rng(int.from_bytes(os.urandom(8), "little"))


def _cell(raw: int, i: int) -> int:
    return (raw >> (60 - 4 * i)) & 0xF


def _format_cell(e: int) -> str:
    if e == 0:
        return " " * 7
    s = str(1 << e)
    while len(s) < 7:
        s = " " + s if len(s) == 6 else f" {s} "
    return s


class Board:
    """A packed 4x4 2048 board (16 nibbles of a u64; cell 0 is the top-left,
    the most significant nibble). Immutable: moves return new boards."""

    __slots__ = ("_raw",)
    _raw: int

    def __new__(cls, *args: Any, **kwargs: Any) -> "Board":
        raise TypeError("No constructor defined for Board")

    @classmethod
    def _of(cls, raw: int) -> "Board":
        b = object.__new__(cls)
        object.__setattr__(b, "_raw", raw)
        return b

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"'Board' object attribute '{name}' is not writable")

    @staticmethod
    def empty() -> "Board":
        return Board._of(0)

    @staticmethod
    def from_raw(raw: int) -> "Board":
        return Board._of(u64(raw, "raw"))

    @property
    def raw(self) -> int:
        return self._raw

    def shift(self, direction: Move) -> "Board":
        """Slide/merge toward `direction`, without a random tile."""
        return Board._of(int(native().lib.a2pack_board_apply_move(self._raw,
                                                                  move_index(direction))))

    def make_move(self, direction: Move, rng: Optional[Rng] = None, *,
                  seed: Optional[int] = None) -> "Board":
        """Slide, then add a random tile if the board changed."""
        m = move_index(direction)
        r = _rng_for(rng, seed)
        n = native()
        out = n.ffi.new("uint64_t *")
        n.check(n.lib.a2pack_board_make_move_stdrng(self._raw, m, r._h, out))
        return Board._of(int(out[0]))

    def with_random_tile(self, rng: Optional[Rng] = None, *,
                         seed: Optional[int] = None) -> "Board":
        """A 2 (90%) or a 4 in a random empty cell. ValueError on a full
        board (upstream panics)."""
        r = _rng_for(rng, seed)
        n = native()
        out = n.ffi.new("uint64_t *")
        n.check(n.lib.a2pack_board_spawn_stdrng(self._raw, r._h, out))
        return Board._of(int(out[0]))

    def score(self) -> int:
        return int(native().lib.a2pack_board_score(self._raw))

    def is_game_over(self) -> bool:
        """True when no move changes the board (so also for an empty board)."""
        return int(native().lib.a2pack_board_legal_moves(self._raw)) == 0

    def highest_tile(self) -> int:
        """Value of the highest tile; 1 (2**0) for an empty board, as upstream."""
        return int(native().lib.a2pack_board_highest_tile(self._raw)) or 1

    def count_empty(self) -> int:
        return sum(1 for i in range(16) if _cell(self._raw, i) == 0)

    def tile_value(self, index: int) -> int:
        """Value at cell `index` (0..15, row-major); 0 when empty."""
        i = u64(index, "index")
        if i > 15:
            raise IndexError(f"tile index {i} out of range 0..15")
        e = _cell(self._raw, i)
        return 1 << e if e else 0

    def to_values(self) -> List[List[int]]:
        return [[self.tile_value(4 * r + c) for c in range(4)] for r in range(4)]

    def to_exponents(self) -> List[int]:
        return [_cell(self._raw, i) for i in range(16)]

    def __str__(self) -> str:
        cells = [_format_cell(_cell(self._raw, i)) for i in range(16)]
        rows = ["|".join(cells[4 * r:4 * r + 4]) for r in range(4)]
        return "\n" + ("\n" + "-" * 32 + "\n").join(rows) + "\n"

    def __repr__(self) -> str:
        return f"Board({self._raw:#018x})"

    def __iter__(self) -> Iterator[int]:
        return iter([self.tile_value(i) for i in range(16)])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Board):
            return NotImplemented
        return self._raw == other._raw

    def __hash__(self) -> int:
        return hash(("ai_2048.Board", self._raw))

    def __reduce__(self) -> Any:
        return (Board.from_raw, (self._raw,))
