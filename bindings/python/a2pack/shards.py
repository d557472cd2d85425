"""Streaming a sharded dataset larger than RAM under a memory budget, one
epoch at a time.

``ShardStream`` is a :class:`a2pack.Feed` over the dataset's folder (its
ring, producers, resident shards and checkpoints: ``stream.feed``) read the
way an epoch loop reads: iterating yields one epoch of dicts of fresh numpy
arrays, then stands at the next epoch. The order is the feed's block
shuffle: each epoch the shards are permuted by the seed and dealt out to the
ranks, and each rank reads its shards a window at a time, every window's
rows in a seeded random order. See docs/dataset.md, "Datasets larger than
RAM".
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from .dataset import PathLike, _state_bytes
from .feed import DEFAULT_COLUMNS, Feed

# The shard stream's own key in its state_dict: a feed state, or (from
# before the stream was a feed) the block order's state; both load.
_STATE_KEY = "a2pack_shard_stream"


class ShardStream:
    """Batches of a sharded dataset (a single-file one is one shard).

    ``batch_size`` is this rank's batch; ``budget_bytes`` bounds the memory
    of resident shards (it must hold two of the largest shard); ``window``
    is the number of shards a batch is drawn from (0: as many as half the
    budget holds). ``rank``/``world`` deal the shards out to data-parallel
    ranks from the shared ``seed``; every rank then takes the same number of
    batches per epoch. ``prefetch`` loads the next window's shards on a
    library thread. Iterating yields one epoch of dicts of fresh numpy
    arrays (``columns``: any of the feed's, ``indices`` being the global
    rows) and then stands at the next epoch. One thread at a time."""

    def __init__(self, path: PathLike, *, batch_size: int = 4096,
                 budget_bytes: int = 1 << 30, seed: int = 0, rank: int = 0, world: int = 1,
                 window: int = 0, drop_last: bool = False, verify_crc: bool = True,
                 prefetch: bool = True, columns: Sequence[str] = DEFAULT_COLUMNS) -> None:
        self.columns = tuple(columns)
        self.batch_size = int(batch_size)
        self.feed = Feed(path, batch_size=self.batch_size * int(world), budget_bytes=budget_bytes,
                         seed=seed, rank=rank, world=world, shard_window=window,
                         drop_last=drop_last, verify_crc=verify_crc, prefetch=prefetch,
                         columns=self.columns)
        self._epoch = int(self.feed.stats()["epoch"])

    def close(self) -> None:
        """Stop the feed's threads and free the resident shards."""
        self.feed.close()

    def __enter__(self) -> "ShardStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- where it stands
    def info(self) -> Dict[str, int]:
        """rows, runs, shards, max_shard_bytes, window_shards, epoch,
        next_batch, batches (this epoch), rank_shards, rank_rows."""
        st = self.feed.stats()
        sh = self.feed.shards_info(self._epoch)
        at_end = st["epoch"] != self._epoch  # the epoch's batches are all out
        return {**{k: int(sh[k]) for k in ("rows", "runs", "shards", "max_shard_bytes",
                                            "window_shards", "batches", "rank_shards",
                                            "rank_rows")},
                "epoch": self._epoch,
                "next_batch": int(sh["batches"]) if at_end else st["next_batch"]}

    def __len__(self) -> int:
        """Batches in the current epoch."""
        return int(self.feed.shards_info(self._epoch)["batches"])

    @property
    def epoch(self) -> int:
        """The epoch the next batch belongs to."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` at its first batch."""
        self.feed.seek(int(epoch), 0)
        self._epoch = int(epoch)

    def stats(self) -> Dict[str, Union[int, float]]:
        """batches, loads, evictions, bytes_read, resident_bytes,
        resident_shards, load_wait_s (time batches waited for shards),
        load_s."""
        sh = self.feed.shards_info(self._epoch)
        out: Dict[str, Union[int, float]] = {"batches": self.feed.stats()["batches_served"]}
        out.update({k: sh[k] for k in ("loads", "evictions", "bytes_read", "resident_bytes",
                                       "resident_shards", "load_wait_s", "load_s")})
        return out

    # ---- batches
    def batch_indices(self, b: int) -> npt.NDArray[np.int64]:
        """Global row indices of batch ``b`` of the current epoch (nothing is loaded)."""
        return self.feed.batch_indices(int(b), self._epoch)

    def next_batch(self) -> Optional[Dict[str, npt.NDArray[Any]]]:
        """The next batch, or None at the end of the epoch (the stream then
        stands at the next epoch's first batch)."""
        epoch = int(self.feed.stats()["epoch"])
        if epoch != self._epoch:
            self._epoch = epoch
            return None
        batch = next(self.feed)
        # Copies out of the ring slot, which goes back to the producers.
        return {name: np.array(batch[name]) for name in self.columns}

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
        info = self.info()
        return {_STATE_KEY: self.feed.state_dict()["state"], "epoch": info["epoch"],
                "next_batch": info["next_batch"]}

    def load_state_dict(self, state: Union[Dict[str, Any], bytes]) -> None:
        """Resume where :meth:`state_dict` was taken (a state of this stream,
        from before it was a feed too). Mid-epoch the seed, batch size,
        rank count, window and first shards must match (shards appended
        since join at the next epoch); at an epoch's start only the seed and
        batch size. Errors name what differs."""
        self.feed.load_state_dict(_state_bytes(state, _STATE_KEY, "shard stream"))
        self._epoch = int(self.feed.stats()["epoch"])
