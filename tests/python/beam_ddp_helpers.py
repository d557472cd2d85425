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


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_worker(rank, world, port, ds_path, pack_path, seed, out_dir):
    """One rank of a DDP job on gloo over 127.0.0.1: two epochs of its
    batches through a DataLoader into a DistributedDataParallel model; writes
    what it drew to out_dir/rank<r>.json."""
    import datetime
    import json

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from a2pack.torch_data import DistributedSampler, PackRuns, RankShard, StepBatches

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        torch.manual_seed(0)
        data = StepBatches(ds_path)
        sampler = DistributedSampler(data, shuffle=True, seed=seed, batch_size=16)  # rank from dist
        assert (sampler.rank, sampler.num_replicas) == (rank, world)
        loader = torch.utils.data.DataLoader(data, sampler=sampler, batch_size=None)
        model = DistributedDataParallel(torch.nn.Linear(16, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        epochs = []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            drawn = [b.tolist() for b in sampler]
            steps = 0
            for batch in loader:
                loss = torch.nn.functional.cross_entropy(
                    model(batch["exponents"].float()), batch["moves"])
                opt.zero_grad()
                loss.backward()  # all-reduces the gradients across the ranks
                opt.step()
                steps += 1
            epochs.append({"indices": [i for b in drawn for i in b], "steps": steps})
        shard = RankShard(ds_path)  # rank and world from torch.distributed
        pack_runs = PackRuns(pack_path, rank_shard=True)
        result = {"epochs": epochs, "shard": shard.indices.tolist(),
                  "shard_batches": len(shard.sampler(batch_size=16)),
                  "pack": [pack_runs.start, pack_runs.stop],
                  "weights": [p.detach().flatten().tolist() for p in model.parameters()]}
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
    finally:
        dist.destroy_process_group()
