"""2048 boards as u64 nibbles (docs/formats.md, boards and moves)."""

from typing import Iterable

import numpy as np
import numpy.typing as npt

from ._native import ffi, lib

MOVES = ("UP", "DOWN", "LEFT", "RIGHT")


def board_score(board: int) -> int:
    return int(lib.a2pack_board_score(board))


def board_highest_tile(board: int) -> int:
    return int(lib.a2pack_board_highest_tile(board))


def board_apply_move(board: int, move: int) -> int:
    """Board after sliding (no spawn); the same board when the move is illegal."""
    return int(lib.a2pack_board_apply_move(board, move))


def board_legal_moves(board: int) -> int:
    """Bit mask of legal moves (Up 1, Down 2, Left 4, Right 8)."""
    return int(lib.a2pack_board_legal_moves(board))


def board_to_grid(board: int) -> "npt.NDArray[np.uint8]":
    """4x4 array of tile exponents (0 = empty)."""
    b = int(board)
    return np.array([(b >> (60 - 4 * i)) & 0xF for i in range(16)], dtype=np.uint8).reshape(4, 4)


def normalise_branches(ev: Iterable[float], legal_mask: int) -> "npt.NDArray[np.float32]":
    """The upstream per-step branch normalisation of 4 raw move values."""
    src = ffi.new("float[4]", [float(x) for x in ev])
    out = ffi.new("float[4]")
    lib.a2pack_branches_normalise(src, legal_mask, out)
    return np.frombuffer(ffi.buffer(out), dtype=np.float32).copy()
