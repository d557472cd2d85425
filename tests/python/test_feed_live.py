"""Live feeds: a dataset appended to while it is read. New rows join the
endless orders at the next batch and the epoch orders at the next epoch;
nothing uncommitted is served (an appending process killed half-way
included); a state saved over N rows resumes over N + k, at the same or another
world size; the rate limit
holds a learner back until the actors append; bad uses are refused."""

import numpy as np
import pytest

import a2pack
from live_helpers import Appender, built, runs, same, take

COLS = ("boards", "run_ids", "step_indices", "indices")



@pytest.fixture
def ds_dir(tmp_path):
    return built(tmp_path, "ds", 10)


def feed(ds, **kw):
    kw.setdefault("pin", "off")
    kw.setdefault("columns", COLS)
    kw.setdefault("live", True)
    return a2pack.Feed(ds, **kw)




def test_endless_draws_take_the_appended_rows_at_the_next_batch(ds_dir):
    ds = a2pack.Dataset(ds_dir, mmap=True)
    n = len(ds)
    with feed(ds, replacement=True, batch_size=512, seed=3) as f:
        before = take(f, 3)
        assert all(b["indices"].max() < n for b in before)
        r = a2pack.append_runs(ds_dir, runs(100, 6))
        assert f.refresh() == n + r["rows_added"] == r["total_rows"]
        after = take(f, 4)
    assert [b["batch"] for b in after] == [3, 4, 5, 6]
    new = np.concatenate([b["indices"] for b in after])
    assert new.max() >= n and new.max() < r["total_rows"]
    # The served rows are the dataset's rows at those indices.
    rows = a2pack.Dataset(ds_dir).get_batch(np.arange(r["total_rows"]))
    for b in before + after:
        assert np.array_equal(b["boards"], rows["board"][b["indices"]])


def test_epoch_orders_take_new_rows_at_the_next_epoch_and_resume_exactly(ds_dir):
    ds = a2pack.Dataset(ds_dir)
    n = len(ds)
    kw = dict(batch_size=128, seed=5)
    with feed(ds, **kw) as f:
        per_epoch = f.stats()["batches_per_epoch"]
        first = take(f, 2)
        state = f.state_dict()
        a2pack.append_runs(ds_dir, runs(200, 5))
        total = f.refresh()
        rest = take(f, per_epoch - 2)           # epoch 0 as it began: the old rows only
        nxt = take(f, 3)                         # epoch 1: every row
        later_state = f.state_dict()
        tail = take(f, 3)
    seen0 = np.concatenate([b["indices"] for b in first + rest])
    assert sorted(seen0.tolist()) == list(range(n))
    assert all(b["epoch"] == 1 for b in nxt)
    # A new live feed over the grown dataset, from the state taken over n
    # rows: the rest of epoch 0 over the old rows, then the same epoch 1.
    grown = a2pack.Dataset(ds_dir)
    assert len(grown) == total > n
    with feed(grown, **kw) as g:
        g.load_state_dict(state)
        same(take(g, len(rest) + len(nxt)), rest + nxt)
    with feed(grown, **kw) as g:
        g.load_state_dict(later_state)
        same(take(g, 3), tail)
    with feed(grown, **kw) as g:
        epoch1 = [b for b in take(g, 2 * per_epoch + 4) if b["epoch"] == 1]
    assert sorted(np.concatenate([b["indices"] for b in epoch1]).tolist()) == list(range(total))


def test_a_state_resumes_over_grown_rows_at_another_world_size(ds_dir):
    # Two ranks save a state over n rows; the dataset grows; the job comes back
    # as one rank and as three over the grown rows: each global batch is the
    # two ranks' parts end to end, across the epoch where the new rows join.
    ds = a2pack.Dataset(ds_dir)
    kw = dict(batch_size=96, seed=11)
    pair = [feed(ds, rank=r, world=2, **kw) for r in range(2)]
    try:
        per_epoch = pair[0].stats()["batches_per_epoch"]
        for f in pair:
            take(f, 3)
        state = pair[0].state_dict()
        a2pack.append_runs(ds_dir, runs(300, 4))
        for f in pair:
            f.refresh()
        parts = [take(f, per_epoch + 2) for f in pair]
    finally:
        for f in pair:
            f.close()
    assert parts[0][-1]["epoch"] == 1
    grown = a2pack.Dataset(ds_dir)
    assert len(grown) > len(ds)
    with feed(grown, world=1, **kw) as g:
        g.load_state_dict(state)
        whole = take(g, per_epoch + 2)
    for w, a, b in zip(whole, *parts):
        assert (w["epoch"], w["batch"]) == (a["epoch"], a["batch"]) == (b["epoch"], b["batch"])
        assert np.array_equal(w["indices"], np.concatenate([a["indices"], b["indices"]]))
        assert np.array_equal(w["boards"], np.concatenate([a["boards"], b["boards"]]))
    epoch1 = np.concatenate([w["indices"] for w in whole if w["epoch"] == 1])
    assert epoch1.max() >= len(ds)  # the appended rows are in the new epoch
    three = [feed(grown, rank=r, world=3, **kw) for r in range(3)]
    try:
        for f in three:
            f.load_state_dict(state)
        thirds = [take(f, per_epoch + 2) for f in three]
    finally:
        for f in three:
            f.close()
    for w, *ps in zip(whole, *thirds):
        assert np.array_equal(w["indices"], np.concatenate([x["indices"] for x in ps]))


def test_windows_and_priorities_follow_the_growth(ds_dir):
    ds = a2pack.Dataset(ds_dir)
    n = len(ds)
    pr = a2pack.Priorities(n, alpha=1.0, beta=0.4, initial=1.0)
    with feed(ds, window=8, replacement=True, batch_size=32, seed=1, recent=400) as w, \
            feed(ds, priority=pr, batch_size=256, seed=2) as p:
        take(w, 2)
        b = take(p, 1)[0]
        p.update_priorities(b["indices"], np.full(256, 4.0))
        r = a2pack.append_runs(ds_dir, runs(300, 4))
        w.refresh()
        assert p.refresh() == r["total_rows"]
        assert len(pr) == r["total_rows"]
        # New rows start at the largest priority given so far.
        assert np.all(pr.get(np.arange(n, r["total_rows"])) == 4.0)
        for b in take(w, 5):
            idx = b["indices"]
            assert np.all(np.diff(idx, axis=1) == 1)
            assert np.all(b["run_ids"] == b["run_ids"][:, :1])
            assert idx.min() >= r["total_rows"] - 400  # the newest 400 rows
        drawn = np.concatenate([b["indices"] for b in take(p, 8)])
        assert drawn.max() >= n



def test_an_appending_process_never_shows_a_torn_row_even_when_killed(ds_dir, tmp_path):
    """Another process appends while the feed runs; one is SIGKILLed in the
    middle of an append. Every row served equals the committed row at its
    index (appends never change rows), and the feed sees every commit."""
    appender = Appender(tmp_path, ds_dir)
    ds = a2pack.Dataset(ds_dir, mmap=True)
    served = []
    with feed(ds, replacement=True, batch_size=256, seed=9, depth=2) as f:
        proc = appender.start(1000, 6)
        for _ in range(6):
            served += take(f, 5)
        assert proc.wait(timeout=300) == 0
        appender.kill_mid_append()  # one more, killed as soon as it has started appending
        served += take(f, 5)
        rows = f.refresh()
        served += take(f, 5)
    final = a2pack.Dataset(ds_dir)  # recovers nothing: the killed append left no commit
    assert len(final) == rows
    allrows = final.get_batch(np.arange(len(final)))
    for b in served:
        assert b["indices"].max() < len(final)
        assert np.array_equal(b["boards"], allrows["board"][b["indices"]])
    assert max(b["indices"].max() for b in served[-5:]) >= len(ds)


def test_the_rate_limit_waits_for_the_actors(ds_dir):
    ds = a2pack.Dataset(ds_dir)
    n = len(ds)
    limit = a2pack.RateLimit(samples_per_insert=2.0, min_size=n - 100, timeout=0.3)
    with feed(ds, replacement=True, batch_size=50, rate_limit=limit, depth=1) as f:
        got = take(f, 4)  # 2 * 101 units allowed: batches 0..4 (0, 50, ..., 200 served before)
        take(f, 1)
        with pytest.raises(a2pack.FullError, match="rate limit: 250 units served"):
            next(f)
        a2pack.append_runs(ds_dir, runs(400, 2))
        more = take(f, 3)  # the wait sees the commit
    assert len(got) == 4 and [b["batch"] for b in more] == [5, 6, 7]
    with pytest.raises(ValueError, match="samples_per_insert"):
        a2pack.RateLimit(samples_per_insert=0)
    with pytest.raises(a2pack.InvalidArgumentError, match="open the feed with live"):
        a2pack.Feed(ds, replacement=True, rate_limit=a2pack.RateLimit(4.0), pin="off")


def test_bad_uses_are_refused_naming_why(ds_dir, tmp_path):
    ds = a2pack.Dataset(ds_dir)
    with pytest.raises(a2pack.InvalidArgumentError, match="selection of 10 rows does not grow"):
        feed(ds, indices=np.arange(10))
    with pytest.raises(a2pack.InvalidArgumentError, match="stored permutation"):
        feed(ds, shuffle="stored")
    with feed(ds, live=False) as plain:
        with pytest.raises(a2pack.InvalidArgumentError, match="opened without live"):
            plain.refresh()
        plain_state = plain.state_dict()
    with feed(ds) as f:
        with pytest.raises(a2pack.InvalidArgumentError, match="without live; this one is live"):
            f.load_state_dict(plain_state)
        live_state = f.state_dict()
        # The dataset rebuilt with other rows: refused, naming it.
        (tmp_path / "other").mkdir()
        for k, r in enumerate(runs(700, 3)):
            r.save(tmp_path / "other" / f"r{k}.a2run2")
        a2pack.build_dataset(tmp_path / "other", ds_dir, overwrite=True, workers=1)
        with pytest.raises(a2pack.InvalidArgumentError, match="rebuilt or replaced"):
            f.refresh()
    with feed(ds, live=False) as plain:
        with pytest.raises(a2pack.InvalidArgumentError, match="with live; this one is not"):
            plain.load_state_dict(live_state)
