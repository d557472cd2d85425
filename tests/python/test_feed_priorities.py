"""Prioritized replay through the one feed: rows drawn with probability
p^alpha (frequencies within a bound computed from the draw count, fixed
seeds), importance weights, updates while producers run, save/load at the
disk's speed, and every bad input refused naming it with nothing changed."""
import threading

import numpy as np
import pytest

import a2pack
from beam_ddp_helpers import write_run_folder


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    base = tmp_path_factory.mktemp("prio")
    write_run_folder(base / "runs", 6)
    a2pack.build_dataset(base / "runs", base / "ds")
    return a2pack.Dataset(base / "ds")


def feed(ds, pr, **kw):
    kw.setdefault("pin", "off")
    kw.setdefault("held_timeout", 0)
    return a2pack.Feed(ds, priority=pr, columns=("moves", "indices"), seed=3, **kw)


def test_rows_are_drawn_in_proportion_to_p_alpha(ds):
    n = len(ds)
    rng = np.random.default_rng(0)
    p = rng.uniform(0.0, 4.0, n).astype(np.float32)
    p[::7] = 0  # never drawn
    pr = a2pack.Priorities(n, alpha=0.7, beta=0.5)
    pr.update(np.arange(n), p)
    draws = 400
    with feed(ds, pr, batch_size=512) as f:
        seen = np.concatenate([next(f)["indices"].copy() for _ in range(draws)])
    counts = np.bincount(seen, minlength=n)
    assert counts[::7].sum() == 0
    q = p.astype(np.float64) ** 0.7
    q /= q.sum()
    expect = q * len(seen)
    # Stratified draws vary less than independent ones: a binomial bound at
    # six standard deviations (plus one for rounding) holds for every row.
    sd = np.sqrt(expect * (1 - q))
    assert np.all(np.abs(counts - expect) <= 6 * sd + 1)


def test_weights_are_the_importance_weights_of_the_batch(ds):
    n = len(ds)
    p = np.linspace(0.5, 3.0, n, dtype=np.float32)
    pr = a2pack.Priorities(n, alpha=0.6, beta=0.4)
    pr.update(np.arange(n), p)
    with feed(ds, pr, batch_size=256) as f:
        b = next(f)
        idx, w = b["indices"].copy(), b["weights"].copy()
    q = p.astype(np.float64) ** 0.6
    P = q[idx] / q.sum()
    want = (n * P) ** -0.4
    assert np.allclose(w, want / want.max(), rtol=1e-5)
    assert w.max() == pytest.approx(1.0)


def test_the_same_seed_and_updates_give_the_same_batches(ds):
    def run(threads):
        pr = a2pack.Priorities(len(ds), initial=1.0)
        with feed(ds, pr, batch_size=64, threads=threads, depth=0) as f:
            out = []
            for k in range(20):
                b = next(f)
                out.append(b["indices"].copy())
                f.update_priorities(b["indices"], np.full(len(b["indices"]), 0.1 + k,
                                                          np.float32))
                del b
        return out
    a, b = run(1), run(2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_updates_while_producers_draw(ds):
    n = len(ds)
    pr = a2pack.Priorities(n)
    stop = threading.Event()
    errors = []

    def learner():
        rng = np.random.default_rng(1)
        while not stop.is_set():
            try:
                pr.update(rng.integers(0, n, 256), rng.uniform(0.01, 5, 256))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
    t = threading.Thread(target=learner)
    t.start()
    try:
        with feed(ds, pr, batch_size=256, threads=2, depth=4) as f:
            for _ in range(200):
                b = next(f)
                assert b["indices"].min() >= 0 and b["indices"].max() < n
                del b
    finally:
        stop.set()
        t.join()
    assert not errors


def test_priorities_state_the_memory_they_hold():
    n = 1 << 20
    pr = a2pack.Priorities(n)
    # the values (4 bytes a row) and the sum tree (1.14)
    assert 5.1 * n <= pr.nbytes <= 5.2 * n


def test_save_and_load_round_trip_and_numpy_reads_it(ds, tmp_path):
    n = len(ds)
    pr = a2pack.Priorities(n, alpha=0.5)
    vals = np.random.default_rng(2).uniform(0, 9, n).astype(np.float32)
    pr.update(np.arange(n), vals)
    pr.save(tmp_path / "p.npy")
    assert np.array_equal(np.load(tmp_path / "p.npy"), vals)
    back = a2pack.Priorities.load(tmp_path / "p.npy", alpha=0.5, rows=n)
    assert np.array_equal(back.get(np.arange(n)), vals)
    assert back.total == pytest.approx(pr.total)
    np.save(tmp_path / "other.npy", np.ones(n + 1, np.float32))
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="another dataset"):
        a2pack.Priorities.load(tmp_path / "other.npy", rows=n)
    np.save(tmp_path / "f8.npy", np.ones(n))
    with pytest.raises(a2pack.errors.CorruptError, match="f4"):
        a2pack.Priorities.load(tmp_path / "f8.npy")
    (tmp_path / "cut.npy").write_bytes((tmp_path / "p.npy").read_bytes()[:-3])
    with pytest.raises(a2pack.errors.CorruptError, match="bytes of data"):
        a2pack.Priorities.load(tmp_path / "cut.npy")


def test_bad_input_is_refused_naming_it_and_nothing_changes(ds):
    n = len(ds)
    pr = a2pack.Priorities(n, initial=2.0)
    before = pr.get(np.arange(n))
    with pytest.raises(a2pack.errors.OutOfRangeError, match=str(n)):
        pr.update([0, n], [1.0, 1.0])
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(a2pack.errors.InvalidArgumentError, match="position 1"):
            pr.update([0, 1], [3.0, bad])
    assert np.array_equal(pr.get(np.arange(n)), before)
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="alpha"):
        a2pack.Priorities(n, alpha=-1)
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="for a dataset of"):
        feed(ds, a2pack.Priorities(n + 5))
    zero = a2pack.Priorities(n, initial=0.0)
    with feed(ds, zero, batch_size=8) as f:
        with pytest.raises(a2pack.errors.InvalidArgumentError, match="is 0"):
            next(f)
    with pytest.raises(ValueError, match="without priority"):
        a2pack.Feed(ds, pin="off").update_priorities([0], [1.0])


def test_windows_are_drawn_by_the_priority_of_their_first_step(ds):
    """Starts in proportion to p^alpha among the rows that start a window
    (the others, however heavy, never start one); each window's rows share
    its weight, the starts' importance weight."""
    n, T = len(ds), 8
    rid = ds.get_batch(np.arange(n))["run_id"]
    cut = np.flatnonzero(np.diff(rid)) + 1
    firsts, ends = np.concatenate([[0], cut]), np.concatenate([cut, [n]])
    starts = np.zeros(n, bool)
    for a, e in zip(firsts, ends):
        starts[a:e - T + 1] = True
    rng = np.random.default_rng(5)
    p = rng.uniform(0.2, 3.0, n).astype(np.float32)
    p[~starts] = 50.0  # heavy, but they start no window
    pr = a2pack.Priorities(n, alpha=0.8, beta=0.6)
    pr.update(np.arange(n), p)
    with a2pack.Feed(ds, priority=pr, window=T, batch_size=128, seed=2, pin="off",
                     columns=("run_ids", "indices", "weights")) as f:
        got = [{k: np.array(b[k]) for k in ("run_ids", "indices", "weights")}
               for b in (next(f) for _ in range(300))]
    idx = np.concatenate([g["indices"] for g in got])
    assert idx.shape[1] == T and np.all(np.diff(idx, axis=1) == 1)
    assert np.all(np.concatenate([g["run_ids"] for g in got]) ==
                  np.concatenate([g["run_ids"] for g in got])[:, :1])
    first = idx[:, 0]
    assert starts[first].all()
    q = np.where(starts, p.astype(np.float64) ** 0.8, 0.0)
    q /= q.sum()
    expect = q * len(first)
    counts = np.bincount(first, minlength=n)
    assert np.all(np.abs(counts - expect) <= 6 * np.sqrt(expect * (1 - q)) + 1)
    for g in got:
        w = g["weights"]
        assert np.all(w == w[:, :1])
        pa = p[g["indices"][:, 0]].astype(np.float64) ** 0.8
        assert np.allclose(w[:, 0], (pa / pa.min()) ** -0.6, rtol=1e-5)
