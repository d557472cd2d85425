"""Streaming a sharded dataset larger than RAM under a memory budget.

``ShardStream`` keeps whole shards in memory (least recently used out) and
hands out batches of a block shuffle: each epoch the shards are permuted by
the seed and dealt out to the ranks, and each rank reads its shards a window
at a time, every window's rows in a seeded random order. A background thread
loads the next window while the current one is read. See docs/dataset.md,
"Datasets larger than RAM".
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from ._native import check, ffi, fspath, lib
from .dataset import PathLike, _owned_bytes, _state_bytes
from .feed import _COLUMN_INFO, _DTYPES, COLUMNS, DEFAULT_COLUMNS

# The feed's columns that a2pack_dataset_columns can take (and indices,
# filled apart), with their shapes and dtypes from the library's table.
_GATHERED = frozenset(f for f, _ in ffi.typeof("a2pack_dataset_columns").fields) - {"size"}
_COLUMNS = tuple(c for c in COLUMNS if c in _GATHERED or c == "indices")
_DEFAULT_COLUMNS = DEFAULT_COLUMNS


class ShardStream:
    """Batches of a sharded dataset (a single-file one is one shard).

    ``budget_bytes`` bounds the memory of resident shards (it must hold two
    of the largest shard); ``window`` is the number of shards a batch is drawn
    from (0: as many as half the budget holds). ``rank``/``world`` deal the
    shards out to data-parallel ranks from the shared ``seed``; every rank
    then takes the same number of batches per epoch. Iterating yields one
    epoch of dicts of fresh numpy arrays (``columns`` of exponents uint8
    [B,16], moves uint8 [B], legal bool [B,4], ev_values float32 [B,4],
    boards uint64, run_ids uint32, step_indices uint16, legal_mask uint8,
    indices int64 - the global rows) and then stands at the next epoch. One thread at a time."""

    def __init__(self, path: PathLike, *, batch_size: int = 4096,
                 budget_bytes: int = 1 << 30, seed: int = 0, rank: int = 0, world: int = 1,
                 window: int = 0, drop_last: bool = False, verify_crc: bool = True,
                 prefetch: bool = True, columns: Sequence[str] = _DEFAULT_COLUMNS) -> None:
        bad = [c for c in columns if c not in _COLUMNS]
        if bad:
            raise ValueError(f"unknown columns {bad}; choose from {list(_COLUMNS)}")
        self.columns = tuple(columns)
        self.batch_size = int(batch_size)
        o = ffi.new("a2pack_shard_stream_options *")
        lib.a2pack_shard_stream_options_init(o)
        o.budget_bytes = int(budget_bytes)
        o.batch_size = self.batch_size
        o.seed = int(seed)
        o.rank, o.world = int(rank), int(world)
        o.window_shards = int(window)
        o.drop_last = bool(drop_last)
        o.verify_crc = bool(verify_crc)
        o.prefetch = bool(prefetch)
        out = ffi.new("a2pack_shard_stream **")
        check(lib.a2pack_shard_stream_open(fspath(path), o, out))
        self._h: Any = ffi.gc(out[0], lib.a2pack_shard_stream_close)

    def _handle(self) -> Any:
        if self._h is None:
            raise ValueError("the shard stream is closed")
        return self._h

    def close(self) -> None:
        """Stop the loader thread and free the resident shards."""
        if self._h is not None:
            h, self._h = self._h, None
            ffi.release(h)

    def __enter__(self) -> "ShardStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- where it stands
    def info(self) -> Dict[str, int]:
        """rows, runs, shards, max_shard_bytes, window_shards, epoch,
        next_batch, batches (this epoch), rank_shards, rank_rows."""
        i = ffi.new("a2pack_shard_stream_info *")
        i.size = ffi.sizeof("a2pack_shard_stream_info")
        check(lib.a2pack_shard_stream_get_info(self._handle(), i))
        return {k: int(getattr(i, k)) for k in (
            "rows", "runs", "shards", "max_shard_bytes", "window_shards", "epoch", "next_batch",
            "batches", "rank_shards", "rank_rows")}

    def __len__(self) -> int:
        """Batches in the current epoch."""
        return self.info()["batches"]

    @property
    def epoch(self) -> int:
        """The epoch the next batch belongs to."""
        return self.info()["epoch"]

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` at its first batch."""
        check(lib.a2pack_shard_stream_set_epoch(self._handle(), int(epoch)))

    def stats(self) -> Dict[str, Union[int, float]]:
        """batches, loads, evictions, bytes_read, resident_bytes,
        resident_shards, load_wait_s (time next() waited for shards), load_s."""
        s = ffi.new("a2pack_shard_stream_stats *")
        s.size = ffi.sizeof("a2pack_shard_stream_stats")
        check(lib.a2pack_shard_stream_get_stats(self._handle(), s))
        out: Dict[str, Union[int, float]] = {k: int(getattr(s, k)) for k in (
            "batches", "loads", "evictions", "bytes_read", "resident_bytes", "resident_shards")}
        out["load_wait_s"] = float(s.load_wait_s)
        out["load_s"] = float(s.load_s)
        return out

    # ---- batches
    def batch_indices(self, b: int) -> npt.NDArray[np.int64]:
        """Global row indices of batch ``b`` of the current epoch (nothing is loaded)."""
        out = np.empty(self.batch_size, np.int64)
        n = ffi.new("size_t *")
        check(lib.a2pack_shard_stream_batch_indices(
            self._handle(), int(b), ffi.cast("int64_t *", out.ctypes.data), n))
        return out[:n[0]]

    def next_batch(self) -> Optional[Dict[str, npt.NDArray[Any]]]:
        """The next batch, or None at the end of the epoch (the stream then
        stands at the next epoch's first batch)."""
        bs = self.batch_size
        want = self.columns
        arrays: Dict[str, npt.NDArray[Any]] = {}
        cols = ffi.new("a2pack_dataset_columns *")
        cols.size = ffi.sizeof("a2pack_dataset_columns")

        for name, info in zip(COLUMNS, _COLUMN_INFO):
            if name in want and name in _GATHERED:
                a = np.empty((bs, info.width) if info.ndim == 2 else bs, _DTYPES[info.dtype])
                arrays[name] = a
                setattr(cols, name, ffi.cast(ffi.typeof(getattr(cols, name)), a.ctypes.data))
        idx = np.empty(bs, np.int64) if "indices" in want else None
        n = ffi.new("size_t *")
        check(lib.a2pack_shard_stream_next(
            self._handle(), cols, ffi.NULL if idx is None else ffi.cast("int64_t *", idx.ctypes.data),
            n))
        k = int(n[0])
        if k == 0:
            return None
        if idx is not None:
            arrays["indices"] = idx
        return {name: a[:k] for name, a in arrays.items()}

    def __iter__(self) -> Iterator[Dict[str, npt.NDArray[Any]]]:
        while True:
            b = self.next_batch()
            if b is None:
                return
            yield b

    # ---- checkpoints
    def state_dict(self) -> Dict[str, Any]:
        """``{"a2pack_shard_stream": bytes, "epoch": e, "next_batch": k}``:
        the position, O(1) bytes (the bytes are what is restored)."""
        data, n = ffi.new("uint8_t **"), ffi.new("size_t *")
        check(lib.a2pack_shard_stream_save_state(self._handle(), data, n))
        i = self.info()
        return {"a2pack_shard_stream": _owned_bytes(data, n), "epoch": i["epoch"],
                "next_batch": i["next_batch"]}

    def load_state_dict(self, state: Union[Dict[str, Any], bytes]) -> None:
        """Resume where :meth:`state_dict` was taken. Mid-epoch the seed,
        batch size, rank count, window and first shards must match (shards
        appended since join at the next epoch); at an epoch's start only the
        seed and batch size. Errors name what differs."""
        raw = _state_bytes(state, "a2pack_shard_stream", "shard stream")
        check(lib.a2pack_shard_stream_load_state(self._handle(), raw, len(raw)))
