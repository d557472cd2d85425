"""Checkpoints, elastic ranks and mixing (resume exactly on any number of
ranks): a2pack's samplers saved and restored by the peers' own
machinery (torchdata's StatefulDataLoader, in a new process), the elastic
property for 1-8 ranks over several epochs, exact mixing proportions, and
refusals of foreign or damaged states."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import a2pack
from a2pack.dataset import EpochSampler
from a2pack.mix import MixSampler

HERE = pathlib.Path(__file__).resolve().parent


# ---------------------------------------------------------------- StatefulDataLoader
def _resume_in_new_process(cfg, tmp_path):
    """The uninterrupted run and the resumed one, each in a process of its
    own: a forked loader worker then inherits only that process (not the
    threads of whatever this one imported: a worker forked from a process
    that runs gRPC's threads can deadlock)."""
    cfg = dict(cfg, state=str(tmp_path / "state.pkl"), out=str(tmp_path / "out.json"),
               whole_out=str(tmp_path / "whole.json"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE)] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    for mode in ("whole", "resume"):
        r = subprocess.run([sys.executable, str(HERE / "resume_helpers.py"), json.dumps(cfg),
                            mode], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    whole = json.loads(pathlib.Path(cfg["whole_out"]).read_text())
    resumed = json.loads(pathlib.Path(cfg["out"]).read_text())
    return whole, resumed


CASES = [  # (sampler, workers, context)
    ("epoch", 0, None), ("epoch", 2, "fork"), ("epoch", 2, "spawn"),
    ("elastic", 0, None), ("elastic", 2, "spawn"),
    ("mix", 0, None), ("mix", 2, "fork"),
]


@pytest.mark.parametrize("sampler,workers,context", CASES)
@pytest.mark.parametrize("k", [3, 9])  # mid-epoch 0, and its last batch (10 per epoch)
def test_stateful_dataloader_resumes_exactly_in_a_new_process(tmp_path, sampler, workers,
                                                              context, k):
    pytest.importorskip("torchdata.stateful_dataloader")
    cfg = dict(n=200, batch=20, epochs=3, k=k, sampler=sampler, workers=workers,
               context=context, world=1, rank=0, mix_batches=30)
    whole, resumed = _resume_in_new_process(cfg, tmp_path)
    assert len(whole) == 30
    assert resumed == whole[k + 1:]  # same row ids, same order, across epoch boundaries


# ---------------------------------------------------------------- plain state dicts
def test_epoch_sampler_state_is_small_and_resumes_across_epochs():
    s = EpochSampler(np.arange(1000) * 3, batch_size=64, seed=5)
    whole = []
    for e in range(3):
        s.set_epoch(e)
        whole += [b.tolist() for b in s]
    s.set_epoch(1)
    it = iter(s)
    for _ in range(4):
        next(it)
    st = s.state_dict()
    assert len(st["a2pack_sampler"]) == 64 and st == it.state_dict()
    t = EpochSampler(np.arange(1000) * 3, batch_size=64, seed=123)  # the state's seed wins
    t.load_state_dict(st)
    got = []
    for e in range(t.epoch, 3):
        t.set_epoch(e)  # same epoch as loaded: keeps the saved position
        got += [b.tolist() for b in t]
    assert got == whole[16 + 4:]


def test_foreign_damaged_and_versioned_states_are_refused():
    s = EpochSampler(n=100, batch_size=10, seed=1)
    st = s.state_dict()
    with pytest.raises(a2pack.InvalidArgumentError, match="another set of rows"):
        EpochSampler(n=101, batch_size=10).load_state_dict(st)
    with pytest.raises(a2pack.InvalidArgumentError, match="batch size"):
        EpochSampler(n=100, batch_size=20).load_state_dict(st)
    raw = bytearray(st["a2pack_sampler"])
    raw[20] ^= 1
    with pytest.raises(a2pack.errors.Error, match="damaged"):
        s.load_state_dict({"a2pack_sampler": bytes(raw)})
    raw = bytearray(st["a2pack_sampler"])
    raw[4] = 9
    with pytest.raises(a2pack.errors.Error, match="version 9"):
        s.load_state_dict({"a2pack_sampler": bytes(raw)})
    with pytest.raises(ValueError, match="not a sampler state_dict"):
        s.load_state_dict({"yielded": 3})
    m = MixSampler([10, 10], [1, 1], batch_size=4)
    with pytest.raises(a2pack.InvalidArgumentError, match="not a sampler state"):
        s.load_state_dict({"a2pack_sampler": m.state_dict()["a2pack_mix"]})
    with pytest.raises(a2pack.InvalidArgumentError, match="2 sources"):
        MixSampler([10, 10, 10], [1, 1, 1], batch_size=4).load_state_dict(m.state_dict())


def test_torch_compatible_distributed_sampler_state_needs_the_same_ranks():
    from a2pack import torch_data
    D = torch_data.DistributedSampler
    a = D(103, num_replicas=4, rank=2, seed=9)
    a.set_epoch(1)
    it = iter(a)
    head = [next(it) for _ in range(7)]
    st = a.state_dict()
    rest = list(it)
    b = D(103, num_replicas=4, rank=2, seed=9)
    b.load_state_dict(st)
    b.set_epoch(1)
    assert list(b) == rest
    assert [int(x) for x in head + rest] == a.rank_indices().tolist()
    with pytest.raises(ValueError, match="needs elastic=True"):
        D(103, num_replicas=2, rank=0, seed=9).load_state_dict(st)


# ---------------------------------------------------------------- elastic property
def _epoch_rows(samplers, start_batch, nbatches):
    """Per global step, the union of the ranks' parts."""
    return [np.concatenate([s.part(b) for s in samplers]) for b in range(start_batch, nbatches)]


@pytest.mark.parametrize("saved_world", [4, 3])
def test_elastic_resume_on_1_to_8_ranks_sees_each_row_once(saved_world):
    n, gb = 1000, 48
    ref = EpochSampler(n=n, batch_size=gb, seed=11)
    for epoch in range(3):
        ref.set_epoch(epoch)
        whole = [ref.batch(b) for b in range(len(ref))]
        for world in range(1, 9):
            ranks = [EpochSampler(n=n, batch_size=gb, seed=11, rank=r, world=world)
                     for r in range(world)]
            for s in ranks:
                s.set_epoch(epoch)
            # every global step: the union of the ranks' batches is the one-rank batch
            assert all(np.array_equal(u, w) for u, w in zip(_epoch_rows(ranks, 0, len(ref)), whole))
            # saved at `saved_world` ranks after step 5, resumed at `world` ranks
            saver = EpochSampler(n=n, batch_size=gb, seed=11, rank=0, world=saved_world)
            saver.set_epoch(epoch)
            it = iter(saver)
            for _ in range(6):
                next(it)
            st = saver.state_dict()
            resumed = [EpochSampler(n=n, batch_size=gb, seed=0, rank=r, world=world)
                       for r in range(world)]
            parts = []
            for s in resumed:
                s.load_state_dict(st)
                parts += [p for p in s]
            seen = np.concatenate([w for w in whole[:6]] + parts)
            assert np.array_equal(np.sort(seen), np.arange(n))  # none twice, none dropped


@pytest.mark.parametrize("world", range(1, 9))
def test_elastic_mix_parts_tile_the_global_batch(world):
    srcs = [np.arange(0, 300), np.arange(300, 350), 40]
    one = MixSampler(srcs, [0.5, 0.3, 0.2], batch_size=37, seed=4)
    ranks = [MixSampler(srcs, [0.5, 0.3, 0.2], batch_size=37, seed=4, rank=r, world=world)
             for r in range(world)]
    for b in range(40):  # several epochs of every source
        whole = one.batch_with_sources(b)
        got = [m.batch_with_sources(b) for m in ranks]
        assert np.array_equal(np.concatenate([g[0] for g in got]), whole[0])
        assert np.array_equal(np.concatenate([g[1] for g in got]), whole[1])


def test_distributed_sampler_elastic_resume_4_to_2_ranks():
    from a2pack import torch_data
    D = torch_data.DistributedSampler
    n, gb = 500, 40
    saver = D(n, num_replicas=4, rank=3, elastic=True, global_batch_size=gb, seed=3)
    saver.set_epoch(2)
    it = iter(saver)
    for _ in range(5):
        next(it)
    st = saver.state_dict()
    before = np.concatenate([_global(n, gb, 3, 2, b) for b in range(5)])
    after = []
    for r in range(2):
        s = D(n, num_replicas=2, rank=r, elastic=True, global_batch_size=gb, seed=3)
        s.load_state_dict(st)
        s.set_epoch(2)
        after += list(s)
    assert np.array_equal(np.sort(np.concatenate([before] + after)), np.arange(n))
    with pytest.raises(a2pack.InvalidArgumentError, match="global batch size"):
        D(n, num_replicas=2, rank=0, elastic=True, batch_size=gb, seed=3).load_state_dict(st)


def _global(n, gb, seed, epoch, b):
    s = EpochSampler(n=n, batch_size=gb, seed=seed)
    s.set_epoch(epoch)
    return s.batch(b)


def test_rank_shard_elastic_sampler_resumes_on_other_world(tmp_path):
    from a2pack import torch_data
    from test_dataset import make_run, write_runs
    write_runs(tmp_path / "runs", [make_run(s, 20 + 7 * s) for s in range(12)])
    a2pack.build_dataset(tmp_path / "runs", tmp_path / "ds")
    n = len(a2pack.Dataset(tmp_path / "ds"))
    shard = torch_data.RankShard(tmp_path / "ds", 1, 4)
    s = shard.sampler(batch_size=8, seed=2, elastic=True)
    it = iter(s)
    next(it), next(it)
    st = s.state_dict()
    rest = []
    for r in range(3):
        t = torch_data.RankShard(tmp_path / "ds", r, 3).sampler(
            batch_size=8, seed=2, elastic=True, global_batch_size=32)
        t.load_state_dict(st)
        rest += list(t)
    seen = np.concatenate([_global(n, 32, 2, 0, b) for b in range(2)] + rest)
    assert np.array_equal(np.sort(seen), np.arange(n))


# ---------------------------------------------------------------- mixing
def test_mix_counts_are_exact_every_batch_and_even_over_time():
    m = MixSampler([100, 100, 100], [0.5, 0.25, 0.25], batch_size=10, seed=1)
    totals = np.zeros(3)
    for b in range(300):
        c = m.counts(b).astype(float)
        assert c.sum() == 10
        assert np.all(np.abs(c - np.array([5, 2.5, 2.5])) < 1)
        idx, src = m.batch_with_sources(b)
        assert np.array_equal(np.bincount(src, minlength=3), c)
        totals += c
    assert np.allclose(totals / 300, [5, 2.5, 2.5])  # tied remainders rotate


def test_mix_walks_each_source_as_epochs_and_changes_weights_at_a_checkpoint():
    a, b = np.arange(0, 60), np.arange(1000, 1012)
    m = MixSampler([a, b], [2, 1], batch_size=9, seed=3)
    rows = {0: [], 1: []}
    for k in range(20):
        idx, src = m.batch_with_sources(k)
        for i in (0, 1):
            rows[i] += idx[src == i].tolist()
    # source 1 (12 rows) is taken 3 per batch: each run of 12 is a permutation
    for e in range(5):
        assert sorted(rows[1][12 * e:12 * e + 12]) == b.tolist()
    assert sorted(rows[0][:60]) == a.tolist()
    it = iter(m)
    for _ in range(7):
        next(it)
    m.set_weights([0, 1])
    st = m.state_dict()
    assert st["weights"] == [0.0, 1.0] and len(st["a2pack_mix"]) == 44 + 32 * 2
    after = [next(it) for _ in range(5)]
    r = MixSampler([a, b], [2, 1], batch_size=9, seed=99)
    r.load_state_dict(st)
    assert r.weights == [0.0, 1.0]
    got = [x for _, x in zip(range(5), r)]
    assert all(np.array_equal(x, y) for x, y in zip(after, got))
    assert all(np.isin(x, b).all() for x in got)
    with pytest.raises(a2pack.OutOfRangeError, match="before batch 7"):
        r.batch(3)
    with pytest.raises(a2pack.InvalidArgumentError, match="no rows"):
        MixSampler([a, np.array([], dtype=np.int64)], [1, 1], batch_size=4)
    with pytest.raises(a2pack.InvalidArgumentError, match="sum to 0"):
        MixSampler([a, b], [0, 0], batch_size=4)
    with pytest.raises(a2pack.InvalidArgumentError, match="finite"):
        MixSampler([a, b], [1, float("nan")], batch_size=4)


def test_mixed_step_batches_over_two_datasets(tmp_path):
    pytest.importorskip("torch")
    from a2pack import torch_data
    from test_dataset import make_run, write_runs
    dirs = []
    for j in range(2):
        write_runs(tmp_path / f"r{j}", [make_run(s + 50 * j, 20 + s) for s in range(4)])
        a2pack.build_dataset(tmp_path / f"r{j}", tmp_path / f"d{j}")
        dirs.append(tmp_path / f"d{j}")
    sizes = [len(a2pack.Dataset(d)) for d in dirs]
    m = MixSampler(sizes, [0.5, 0.5], batch_size=16, seed=1, tagged=True, num_batches=3)
    data = torch_data.MixedStepBatches(dirs)
    for key in m:
        got = data[key]
        for i, d in enumerate(dirs):
            want = a2pack.Dataset(d).get_batch_columns(key[1][key[0] == i])[0]
            assert np.array_equal(got["exponents"].numpy()[key[0] == i], want)
