"""A live feed over a sharded dataset's folder: an append adds shards, and
the feed takes them in without being opened again - at the next epoch of
its block shuffle, for every rank - keeping the shards it holds resident
and within its budget. A state saved over N rows resumes over N + k; an
appending process killed half-way shows nothing; a dataset replaced, or a
new shard the budget cannot hold, is refused naming why."""
import json
import os

import numpy as np
import pytest

import a2pack
from live_helpers import Appender, built, runs, same, take

SHARD_ROWS = 200
BUDGET = 4 * SHARD_ROWS * 32  # two windows of two shards



@pytest.fixture
def sharded(tmp_path):
    return built(tmp_path, "sh", 12, shard_rows=SHARD_ROWS)


def feed(path, **kw):
    kw.setdefault("pin", "off")
    kw.setdefault("budget_bytes", BUDGET)
    kw.setdefault("columns", ("boards", "run_ids", "indices"))
    return a2pack.Feed(path, live=True, **kw)




def shards_of(path):
    with open(os.path.join(path, "manifest.json")) as m:
        return len(json.load(m)["shards"])


def check_rows(path, batches):
    rows = a2pack.Dataset(path).get_batch(np.arange(len(a2pack.Dataset(path))))
    for b in batches:
        assert np.array_equal(b["boards"], rows["board"][b["indices"]])
        assert np.array_equal(b["run_ids"], rows["run_id"][b["indices"]])


def test_appended_shards_join_at_the_next_epoch_and_a_state_resumes_over_them(sharded):
    n = len(a2pack.Dataset(sharded))
    before = shards_of(sharded)
    kw = dict(batch_size=64, seed=5)
    with feed(sharded, **kw) as f:
        per_epoch = f.stats()["batches_per_epoch"]
        first = take(f, 2)
        state = f.state_dict()
        r = a2pack.append_runs(sharded, runs(200, 6))
        assert shards_of(sharded) > before  # the append wrote new shards
        total = f.refresh()
        assert total == r["total_rows"] > n
        rest = take(f, per_epoch - 2)   # epoch 0 as it began: the old shards only
        grown_per_epoch = f.stats()["batches_per_epoch"]
        nxt = take(f, grown_per_epoch)  # epoch 1: every shard
        later_state = f.state_dict()
        tail = take(f, 2)
    assert all(b["epoch"] == 0 for b in first + rest)
    assert sorted(np.concatenate([b["indices"] for b in first + rest]).tolist()) == list(range(n))
    assert all(b["epoch"] == 1 for b in nxt) and grown_per_epoch > per_epoch
    epoch1 = np.concatenate([b["indices"] for b in nxt])
    assert sorted(epoch1.tolist()) == list(range(total))
    check_rows(sharded, first + rest + nxt + tail)
    # Resumed in a new live feed over the grown folder: the rest of epoch 0
    # over the old shards, then the same epoch 1.
    with feed(sharded, **kw) as g:
        g.load_state_dict(state)
        same(take(g, len(rest) + len(nxt)), rest + nxt)
    with feed(sharded, **kw) as g:
        g.load_state_dict(later_state)
        same(take(g, 2), tail)


def test_each_rank_takes_the_new_shards_in_at_the_same_epoch(sharded):
    kw = dict(batch_size=64, seed=3, world=2)
    pair = [feed(sharded, rank=r, **kw) for r in range(2)]
    try:
        per_epoch = pair[0].stats()["batches_per_epoch"]
        for f in pair:
            take(f, 1)
        states = [f.state_dict() for f in pair]
        a2pack.append_runs(sharded, runs(300, 8))
        for f in pair:
            f.refresh()
        parts = [take(f, per_epoch - 1 + 3) for f in pair]
    finally:
        for f in pair:
            f.close()
    for p in parts:
        assert [b["epoch"] for b in p] == [0] * (per_epoch - 1) + [1] * 3
        assert all(len(b["indices"]) == 32 for b in p)
    n = len(a2pack.Dataset(sharded))
    for e in (0, 1):
        a, b = (np.concatenate([x["indices"] for x in p if x["epoch"] == e]) for p in parts)
        assert not set(a.tolist()) & set(b.tolist())  # each rank its own shards
    check_rows(sharded, parts[0] + parts[1])
    assert max(int(x["indices"].max()) for p in parts for x in p) < n
    # Both ranks resume from their states over the grown shards.
    for r in range(2):
        with feed(sharded, rank=r, **kw) as g:
            g.load_state_dict(states[r])
            same(take(g, len(parts[r])), parts[r])



def test_an_appending_process_killed_half_way_shows_nothing(sharded, tmp_path):
    appender = Appender(tmp_path, sharded)
    n = len(a2pack.Dataset(sharded))
    served = []
    with feed(sharded, batch_size=64, seed=9, depth=2) as f:
        proc = appender.start(1000, 3)
        while proc.poll() is None:
            served += take(f, 2)
        assert proc.wait(timeout=300) == 0
        appender.kill_mid_append()
        rows = f.refresh()
        epoch = f.stats()["epoch"]
        while True:  # on into an epoch that holds every committed shard
            b = take(f, 1)[0]
            served.append(b)
            if b["epoch"] > epoch + 1:
                break
    final = a2pack.Dataset(sharded)  # the killed append left no commit
    assert len(final) == rows > n
    check_rows(sharded, served)
    assert max(int(b["indices"].max()) for b in served) >= n


def test_a_replaced_dataset_or_a_shard_too_large_is_refused_naming_why(sharded, tmp_path):
    with feed(sharded, batch_size=64) as f:
        take(f, 1)
        (tmp_path / "other").mkdir()
        for k, r in enumerate(runs(700, 8)):
            r.save(tmp_path / "other" / f"r{k}.a2run2")
        a2pack.build_dataset(tmp_path / "other", sharded, overwrite=True, workers=1,
                             shard_rows=SHARD_ROWS)
        with pytest.raises(a2pack.InvalidArgumentError, match="rebuilt or replaced"):
            f.refresh()
    with feed(sharded, batch_size=64) as f:
        take(f, 1)
        a2pack.append_runs(sharded, runs(400, 40), shard_rows=4 * SHARD_ROWS)
        with pytest.raises(a2pack.InvalidArgumentError, match="an appended shard of .* bytes"):
            f.refresh()
    flat = tmp_path / "flat"
    a2pack.build_dataset(tmp_path / "runs", flat, workers=1)
    with pytest.raises(a2pack.UnsupportedError, match="keeps its rows in one steps.npy"):
        feed(flat, batch_size=64, budget_bytes=1 << 24)
