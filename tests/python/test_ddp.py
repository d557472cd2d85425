"""Multi-rank training with a2pack.torch_data: DistributedSampler against
torch's own, a two-process DDP job on gloo over 127.0.0.1, per-rank shards
of datasets and packs, and spawn-started DataLoader workers with every
picklable a2pack object."""

import json
import os
import pickle
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import a2pack  # noqa: E402
from a2pack import torch_data  # noqa: E402
from beam_ddp_helpers import (EveryObject, ddp_worker, free_port, make_run,  # noqa: E402
                              write_run_folder)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    write_run_folder(root / "runs", 9)
    a2pack.build_dataset(root / "runs", root / "ds")
    a2pack.pack_dir(root / "runs", root / "runs.a2pack")
    with a2pack.bag.Writer(str(root / "recs.bagz")) as w:
        for i in range(8):
            w.write(b"record %d" % i)
    return root


def test_sampler_is_a_torch_sampler_and_matches_torch(data):
    DS = torch_data.DistributedSampler
    assert issubclass(DS, torch.utils.data.Sampler)
    n = len(a2pack.Dataset(data / "ds"))
    for shuffle in (True, False):
        for drop_last in (True, False):
            for world in (2, 3):
                for rank in range(world):
                    ours = DS(n, num_replicas=world, rank=rank, shuffle=shuffle, seed=7,
                              drop_last=drop_last)
                    ref = torch.utils.data.DistributedSampler(
                        range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=7,
                        drop_last=drop_last)
                    for epoch in (0, 3):
                        ours.set_epoch(epoch)
                        ref.set_epoch(epoch)
                        assert list(ours) == list(ref)
                        assert len(ours) == len(ref)
    with pytest.raises(ValueError, match="invalid rank"):
        DS(10, num_replicas=2, rank=2)
    # Not initialised: one replica.
    s = DS(10)
    assert (s.rank, s.num_replicas) == (0, 1) and sorted(s) == list(range(10))
    # Over a selection, in batches.
    sel = np.arange(100, 130)
    s = DS(sel, num_replicas=2, rank=1, batch_size=4, seed=1)
    batches = list(s)
    assert len(batches) == len(s) == 4 and all(b.dtype == np.int64 for b in batches)
    assert set(np.concatenate(batches)) <= set(sel)
    s2 = pickle.loads(pickle.dumps(s))
    assert [b.tolist() for b in s2] == [b.tolist() for b in batches]


def _run_job(data, out, seed):
    out.mkdir()
    torch.multiprocessing.spawn(ddp_worker, args=(2, free_port(), str(data / "ds"),
                                                  str(data / "runs.a2pack"), seed, str(out)),
                                nprocs=2, join=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_ddp_two_ranks_gloo(data, tmp_path):
    ranks = _run_job(data, tmp_path / "a", seed=5)
    again = _run_job(data, tmp_path / "b", seed=5)
    n = len(a2pack.Dataset(data / "ds"))
    per_epoch = []
    for e in range(2):
        a, b = (ranks[r]["epochs"][e]["indices"] for r in range(2))
        assert len(a) == len(b) == -(-n // 2)                 # same count on every rank
        assert ranks[0]["epochs"][e]["steps"] == ranks[1]["epochs"][e]["steps"]
        assert set(a) | set(b) == set(range(n))               # complete
        assert len(set(a) & set(b)) == 2 * len(a) - n          # disjoint but for padding
        per_epoch.append(a + b)
    assert per_epoch[0] != per_epoch[1]                       # reshuffled per epoch
    assert ranks == again                                     # same seed, same draws
    assert ranks[0]["weights"] == ranks[1]["weights"]         # DDP kept the replicas in step
    # Per-rank shards: whole runs, disjoint, complete.
    s0, s1 = ranks[0]["shard"], ranks[1]["shard"]
    assert not set(s0) & set(s1) and sorted(s0 + s1) == list(range(n))
    assert ranks[0]["shard_batches"] == ranks[1]["shard_batches"]
    steps = a2pack.Dataset(data / "ds").steps
    assert not set(steps["run_id"][s0]) & set(steps["run_id"][s1])
    p0, p1 = ranks[0]["pack"], ranks[1]["pack"]
    assert p0[0] == 0 and p0[1] == p1[0] and p1[1] == len(a2pack.PackReader(data / "runs.a2pack"))


def test_rank_shard_reads_only_its_rows(data):
    shard = torch_data.RankShard(data / "ds", rank=0, num_replicas=2)
    assert shard.dataset.info["mapped"]
    assert sum(shard.counts) == len(a2pack.Dataset(data / "ds"))
    copy = pickle.loads(pickle.dumps(shard))
    assert copy.indices.tolist() == shard.indices.tolist()
    sampler = shard.sampler(batch_size=5, pad=True)
    assert sum(len(b) for b in sampler) == max(shard.counts)


def _damage(ds, row, offset, value):
    """Overwrite byte `offset` of row `row` of ds/steps.npy."""
    steps = ds / "steps.npy"
    header = steps.stat().st_size - 32 * len(a2pack.Dataset(ds, verify=False))
    with open(steps, "r+b") as f:
        f.seek(header + 32 * row + offset)
        f.write(bytes([value]))


@pytest.mark.parametrize("field,offset,value,message", [
    ("move", 8, 9, r"move 9 is not 0\.\.3"),
    ("ev_legal", 9, 0x30, r"ev_legal 0x30 has bits above"),
    ("ev_values", 13, 0x7F, r"ev_values .* not all in \[0, 1\]"),  # a float's top byte
    ("run_id", 26, 0x55, r"run_id \d+ inside a run whose rows carry run_id"),
    ("step_index", 30, 77, r"step_index 77 follows"),
    ("board", 3, 0x5A, None),  # any u64 is a board: only the CRC sees this
])
def test_rank_shard_checks_its_rows(data, tmp_path, field, offset, value, message):
    """A damaged row in a rank's range is an error naming steps.npy and the
    row; the other rank (whose rows are sound) opens; verify='crc' finds any
    damage, a board's too, from any rank through the manifest's CRC."""
    import shutil
    ds = tmp_path / "ds"
    shutil.copytree(data / "ds", ds)
    good = torch_data.RankShard(ds, rank=1, num_replicas=2)
    row = int(good.indices[len(good.indices) // 2])
    while a2pack.Dataset(ds).steps["step_index"][row] < 2:  # inside a run, not at its ends
        row += 1
    _damage(ds, row, offset, value)
    if message is None:
        torch_data.RankShard(ds, rank=1, num_replicas=2)  # the rules cannot see it
        with pytest.raises(a2pack.ChecksumError, match=r"steps\.npy"):
            torch_data.RankShard(ds, rank=1, num_replicas=2, verify="crc")
    else:
        with pytest.raises(a2pack.CorruptError, match=rf"steps\.npy: row {row} .*{message}"):
            torch_data.RankShard(ds, rank=1, num_replicas=2)
    torch_data.RankShard(ds, rank=0, num_replicas=2)  # its rows are intact
    with pytest.raises(a2pack.ChecksumError):
        torch_data.RankShard(ds, rank=0, num_replicas=2, verify="crc")
    torch_data.RankShard(ds, rank=1, num_replicas=2, verify=False)  # asked not to check


def test_every_object_pickles(data):
    objs = EveryObject(data / "ds", data / "runs.a2pack", str(data / "recs.bagz"))
    copy = pickle.loads(pickle.dumps(objs))
    for i in range(len(objs)):
        a, b = objs[i], copy[i]
        a.pop("pid"), b.pop("pid")
        assert a == b
    run = make_run(3, 5)
    assert pickle.loads(pickle.dumps(run)) == run


def test_spawned_dataloader_workers_use_every_object(data):
    objs = EveryObject(data / "ds", data / "runs.a2pack", str(data / "recs.bagz"))
    loader = torch.utils.data.DataLoader(objs, batch_size=None, num_workers=2,
                                         multiprocessing_context="spawn")
    got = list(loader)
    assert {g["pid"] for g in got}.isdisjoint({os.getpid()})
    for i, g in enumerate(got):
        want = objs[i]
        for k in want:
            if k != "pid":
                v = g[k].tolist() if isinstance(g[k], torch.Tensor) else g[k]
                assert v == want[k], k


def test_readme_examples_run_as_written(tmp_path):
    """The two examples of README.md's "Beam, Ray and multi-GPU training": the
    Beam pipeline with python, then train.py with torchrun on 2 processes."""
    import re
    import subprocess
    import sys
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Beam, Ray and multi-GPU training", 1)[1].split("\n## ", 1)[0]
    beam_code, train_code = re.findall(r"```python\n(.*?)```", section, re.S)
    (tmp_path / "beam_example.py").write_text(beam_code)
    (tmp_path / "train.py").write_text(train_code)
    out = subprocess.run([sys.executable, "beam_example.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    n = len(a2pack.Dataset(tmp_path / "ds"))
    assert f"{n} steps in ds/, 20 records" in out.stdout
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc_per_node=2", "train.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
