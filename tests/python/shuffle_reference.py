"""The index shuffle written out again in numpy, from its description in
docs/formats.md (feed orders), to check the library's order against: keys
from SplitMix64 of (seed, epoch), an unbalanced Feistel network of four
rounds over the next power of two, cycle-walking past n."""

import numpy as np

M64 = (1 << 64) - 1


def _splitmix(state):
    while True:
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        yield z ^ (z >> 31)


def index_shuffle(n, seed, epoch):
    """Positions 0..n-1 of epoch `epoch`'s order (an array of n ints)."""
    bits = max(0, int(n - 1).bit_length()) if n > 1 else 0
    lo_bits = (bits + 1) // 2
    lo_mask = np.uint32((1 << lo_bits) - 1)
    hi_mask = np.uint32((1 << (bits - lo_bits)) - 1)
    rng = _splitmix(((seed * 0xA24BAED4963EE407) ^ ((epoch + 1) * 0x9FB21C651E98DF25)) & M64)
    keys = [np.uint32(next(rng) >> 32) for _ in range(4)]

    def rounds(x):
        x = x.copy()
        with np.errstate(over="ignore"):
            for k, key in enumerate(keys):
                src = (x >> np.uint32(lo_bits)) if k % 2 == 0 else (x & lo_mask)
                h = (src ^ key) * np.uint32(0x9E3779B1)
                h ^= h >> np.uint32(15)
                h *= np.uint32(0x85EBCA77)
                h ^= h >> np.uint32(13)
                x ^= (h & lo_mask) if k % 2 == 0 else ((h & hi_mask) << np.uint32(lo_bits))
        return x

    x = rounds(np.arange(n, dtype=np.uint32))
    out = x >= n
    while out.any():
        x[out] = rounds(x[out])
        out = x >= n
    return x.astype(np.int64)
