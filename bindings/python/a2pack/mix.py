"""Weighted mixing of several index sources into one sequence of batches.

The sources are selections of one dataset (``Dataset.filter_sql`` by engine,
generation, score...) or the rows of several datasets. Every batch of ``B``
rows holds exactly ``floor(w_i * B)`` or ``ceil(w_i * B)`` rows of source
``i`` (weights normalised to sum 1; the extra rows go by largest remainder,
ties rotating from batch to batch), so the mix never drifts. Each source
walks its own seeded permutation and reshuffles when it runs out, with an
epoch of its own; the rows of a batch are shuffled together. The logic is
the library's (``a2pack_dataset_mix_*``); this is its Python face.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from ._native import check, ffi, lib
from .dataset import _indices, _owned_bytes, _state_bytes

Source = Union[int, np.integer[Any], npt.ArrayLike]


class MixSampler:
    """Endless global sequence of mixed batches, checkpointable.

    ``sources``: per source, a row count (all of ``0..n-1``) or an array of
    step indices. ``weights``: one per source, >= 0, any positive sum.
    ``batch_size``: the global batch; with ``world > 1`` each yielded array
    is rank ``rank``'s contiguous slice of it (the ranks' slices of a step
    are disjoint and make the one-rank batch together, each holding every
    source in proportion). ``num_batches``: iteration stops at that global
    batch (``None``: never). ``tagged``: yield a ``(2, n)`` int64 array,
    row 0 the source numbers and row 1 the indices (for several datasets:
    :class:`a2pack.torch_data.MixedStepBatches`); otherwise the indices.

    :meth:`state_dict` (O(number of sources): seed, weights, rows consumed
    per source, next batch) restores on any rank count; :meth:`set_weights`
    changes the mix from the next batch on.
    """

    def __init__(self, sources: Sequence[Source], weights: Sequence[float], *,
                 batch_size: int = 4096, seed: int = 0, rank: int = 0, world: int = 1,
                 num_batches: Optional[int] = None, tagged: bool = False) -> None:
        if len(sources) != len(weights):
            raise ValueError(f"{len(sources)} sources but {len(weights)} weights")
        if not 0 <= int(rank) < int(world):
            raise ValueError(f"rank {rank} of a world of {world}: expected 0 <= rank < world")
        self.k = len(sources)
        self.batch_size, self.seed = int(batch_size), int(seed)
        self.rank, self.world = int(rank), int(world)
        self.num_batches = None if num_batches is None else int(num_batches)
        self.tagged = bool(tagged)
        self._keep: List[Optional[npt.NDArray[np.int64]]] = []
        src = ffi.new("a2pack_dataset_mix_source[]", max(self.k, 1))
        for i, s in enumerate(sources):
            if isinstance(s, (int, np.integer)):
                self._keep.append(None)
                src[i].indices, src[i].n = ffi.NULL, int(s)
            else:
                a = _indices(s)
                self._keep.append(a)
                src[i].indices = ffi.from_buffer("int64_t[]", a) if a.size else ffi.new("int64_t[1]")
                src[i].n = int(a.size)
        w = ffi.new("double[]", [float(x) for x in weights] or [0.0])
        out = ffi.new("a2pack_dataset_mix **")
        check(lib.a2pack_dataset_mix_open(src, w, self.k, self.seed, self.batch_size, out))
        self._h = ffi.gc(out[0], lib.a2pack_dataset_mix_close)
        self._next = 0
        self._live: Optional[_MixIter] = None

    # ---- batches
    def batch_with_sources(self, b: int, rank: Optional[int] = None, world: Optional[int] = None
                           ) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
        """(indices, source numbers) of rank's slice of global batch ``b``."""
        rank = self.rank if rank is None else int(rank)
        world = self.world if world is None else int(world)
        idx = np.empty(self.batch_size, dtype=np.int64)
        src = np.empty(self.batch_size, dtype=np.uint32)
        n = ffi.new("size_t *")
        check(lib.a2pack_dataset_mix_batch(self._h, int(b), rank, world,
                                           ffi.from_buffer("int64_t[]", idx),
                                           ffi.from_buffer("uint32_t[]", src), n))
        return idx[: n[0]], src[: n[0]]

    def batch(self, b: int, rank: Optional[int] = None, world: Optional[int] = None
              ) -> npt.NDArray[np.int64]:
        return self.batch_with_sources(b, rank, world)[0]

    def counts(self, b: int) -> npt.NDArray[np.uint64]:
        """Rows of each source in global batch ``b``."""
        out = np.empty(self.k, dtype=np.uint64)
        check(lib.a2pack_dataset_mix_counts(self._h, int(b), ffi.from_buffer("uint64_t[]", out)))
        return out

    def consumed(self, b: Optional[int] = None) -> npt.NDArray[np.uint64]:
        """Rows of each source consumed before global batch ``b`` (default:
        the next one); a source's epoch is that over its row count."""
        out = np.empty(self.k, dtype=np.uint64)
        check(lib.a2pack_dataset_mix_consumed(self._h, self._next if b is None else int(b),
                                              ffi.from_buffer("uint64_t[]", out)))
        return out

    @property
    def weights(self) -> List[float]:
        out = ffi.new("double[]", self.k)
        check(lib.a2pack_dataset_mix_get_weights(self._h, out))
        return [float(out[i]) for i in range(self.k)]

    def set_weights(self, weights: Sequence[float], from_batch: Optional[int] = None) -> None:
        """Mix with ``weights`` from ``from_batch`` (default: the next
        batch) on. Do it on every rank at the same global batch."""
        w = ffi.new("double[]", [float(x) for x in weights] or [0.0])
        check(lib.a2pack_dataset_mix_set_weights(self._h, w, len(weights),
                                                 self._next if from_batch is None else int(from_batch)))

    @property
    def next_batch(self) -> int:
        return self._next

    def _at(self, b: int) -> Any:
        idx, src = self.batch_with_sources(b)
        return np.stack([src.astype(np.int64), idx]) if self.tagged else idx

    def __iter__(self) -> "_MixIter":
        self._live = _MixIter(self, self._next)
        return self._live

    def __len__(self) -> int:
        if self.num_batches is None:
            raise TypeError("an endless MixSampler has no len(): give num_batches")
        return self.num_batches

    # ---- checkpoints
    def state(self, next_batch: int) -> bytes:
        data, n = ffi.new("uint8_t **"), ffi.new("size_t *")
        check(lib.a2pack_dataset_mix_state(self._h, int(next_batch), data, n))
        return _owned_bytes(data, n)

    def state_dict(self) -> Dict[str, Any]:
        """``{"a2pack_mix": bytes, "next_batch": k, "weights": [...]}``: the
        bytes are restored, the rest is for reading."""
        return {"a2pack_mix": self.state(self._next), "next_batch": self._next,
                "weights": self.weights}

    def load_state_dict(self, state: Union[Dict[str, Any], bytes]) -> None:
        """Restore :meth:`state_dict` on any rank count: seed, weights and
        next batch are the state's. Refused with a clear error for another
        source list (count, rows), batch size or version, or damage."""
        raw = _state_bytes(state, "a2pack_mix", "mixing sampler")
        nb = ffi.new("uint64_t *")
        check(lib.a2pack_dataset_mix_load_state(self._h, raw, len(raw), nb))
        self.seed = int.from_bytes(raw[8:16], "little")
        self._next = int(nb[0])


class _MixIter:
    def __init__(self, m: MixSampler, start: int) -> None:
        self._m = m
        self._pos = start

    def __iter__(self) -> "_MixIter":
        return self

    def __next__(self) -> Any:
        m = self._m
        if m.num_batches is not None and self._pos >= m.num_batches:
            raise StopIteration
        out = m._at(self._pos)
        self._pos += 1
        if m._live is self:
            m._next = self._pos
        return out

    def state_dict(self) -> Dict[str, Any]:
        return {"a2pack_mix": self._m.state(self._pos), "next_batch": self._pos,
                "weights": self._m.weights}

    def load_state_dict(self, state: Union[Dict[str, Any], bytes]) -> None:
        self._m.load_state_dict(state)
        self._pos = self._m._next
        self._m._live = self


def mix_iter(sources: Sequence[Source], weights: Sequence[float], **kw: Any) -> Iterator[Any]:
    """Shorthand: ``iter(MixSampler(sources, weights, **kw))``."""
    return iter(MixSampler(sources, weights, **kw))
