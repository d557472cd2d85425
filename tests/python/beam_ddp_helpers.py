"""Shared by test_beam.py and test_ddp.py (and importable by spawned
DataLoader workers, which unpickle the objects defined here)."""

import os
import pathlib

import numpy as np

import a2pack
from a2pack.run import Meta


def make_run(seed: int, n: int, branches: bool = True, engine="beam") -> a2pack.RunV2:
    """A run with random boards and branch values, some out of [0, 1] and NaN
    (the row rule clamps them), so rows exercise every case."""
    rng = np.random.default_rng(seed)
    boards = rng.integers(0, 2**63, size=n, dtype=np.uint64)
    moves = rng.integers(0, 4, size=n, dtype=np.uint8)
    meta = Meta(steps=n, start_unix_s=1_700_000_000 + seed, elapsed_s=0.25 + seed,
                max_score=1000 + 37 * seed, highest_tile=[512, 1024, 2048][seed % 3],
                engine_str=engine if seed % 4 else None)
    if not branches:
        return a2pack.RunV2.from_arrays(meta, boards, moves, final_board=seed)
    legal = rng.integers(0, 16, size=n, dtype=np.uint8) | (1 << (moves ^ (seed & 1))).astype(np.uint8)
    values = rng.uniform(-0.3, 1.3, size=(n, 4)).astype(np.float32)
    values[::7, 1] = np.nan
    return a2pack.RunV2.from_arrays(meta, boards, moves, values, legal, final_board=seed)


def write_run_folder(folder: pathlib.Path, count: int, first_seed: int = 0,
                     nested: bool = True) -> list:
    """`count` runs as .a2run2 files (some in a subfolder, names whose byte
    order differs from their seed order); returns the paths."""
    paths = []
    for k in range(count):
        seed = first_seed + k
        sub = folder / ("b" if nested and k % 3 == 0 else "")
        sub.mkdir(parents=True, exist_ok=True)
        p = sub / f"run-{(count - k) * 7 % 101:03d}-{seed}.a2run2"
        make_run(seed, 20 + (seed * 13) % 60).save(p)
        paths.append(p)
    return paths


class EveryObject:
    """A map-style dataset holding one of each picklable a2pack object; a
    spawn-started DataLoader worker gets it by pickle and uses them all."""

    def __init__(self, ds_path, pack_path, bag_path):
        from a2pack.torch_data import PackRuns, RankShard, StepBatches
        self.dataset = a2pack.Dataset(ds_path)
        self.batches = StepBatches(ds_path)
        self.pack = a2pack.PackReader(pack_path)
        self.bag = a2pack.bag.Reader(bag_path)
        self.run = self.pack.decode(0)
        self.sampler = self.dataset.sampler(batch_size=4, seed=3)
        self.shard = RankShard(ds_path, rank=1, num_replicas=2)
        self.pack_runs = PackRuns(pack_path, rank_shard=True, rank=1, num_replicas=2)

    def __len__(self):
        return 4

    def __getitem__(self, i):
        i = int(i)
        return {
            "pid": os.getpid(),
            "row": self.dataset.get_batch([i]).tobytes(),
            "exps": self.batches[np.array([i])]["exponents"].numpy().tobytes(),
            "run_len": len(self.pack.decode(i)),
            "record": self.bag[i],
            "run_eq": self.run == self.pack.decode(0),
            "batch0": self.sampler.batch(0).tolist(),
            "shard_first": int(self.shard.indices[0]),
            "pack_shard_len": len(self.pack_runs[0]),
        }
