"""Replay orders through the one feed: windows of consecutive steps that
never cross a run's end (every start once per epoch, or tiles, short runs
skipped or padded), draws with replacement, the newest rows only, ranks,
and resumption from state_dict()."""
import numpy as np
import pytest

import a2pack
from beam_ddp_helpers import write_run_folder

COLS = ("boards", "run_ids", "step_indices", "indices", "valid")


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    base = tmp_path_factory.mktemp("replay")
    write_run_folder(base / "runs", 30)  # runs of 20 to 79 steps
    a2pack.build_dataset(base / "runs", base / "ds")
    return a2pack.Dataset(base / "ds")


def runs_of(ds):
    """(first row, length) of each run, in row order."""
    rid = ds.get_batch(np.arange(len(ds)))["run_id"]
    cut = np.flatnonzero(np.diff(rid)) + 1
    firsts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [len(ds)]])
    return list(zip(firsts.tolist(), (ends - firsts).tolist()))


def feed(ds, **kw):
    kw.setdefault("pin", "off")
    kw.setdefault("columns", COLS)
    return a2pack.Feed(ds, **kw)


def batches(f, n=None):
    out = []
    for b in f:
        out.append({k: b[k].copy() for k in b.keys()} | {"epoch": b.epoch, "batch": b.batch})
        if n is not None and len(out) == n:
            break
    return out


def test_windows_are_consecutive_steps_of_one_run_and_match_the_rows(ds):
    with feed(ds, window=16, batch_size=8, epochs=1, seed=4) as f:
        got = batches(f)
    rows = ds.get_batch(np.arange(len(ds)))
    for b in got:
        assert b["indices"].shape == (len(b["indices"]), 16)
        assert b["boards"].shape == b["indices"].shape
        idx = b["indices"]
        assert np.all(np.diff(idx, axis=1) == 1)
        assert np.all(b["run_ids"] == b["run_ids"][:, :1])  # one run per window
        assert np.all(np.diff(b["step_indices"].astype(int), axis=1) == 1)
        assert np.array_equal(b["boards"], rows["board"][idx])
        assert b["valid"].all()


@pytest.mark.parametrize("stride", [1, 16])
def test_each_start_appears_once_per_epoch(ds, stride):
    T = 16
    want = sorted(f + k for f, n in runs_of(ds) if n >= T
                  for k in range(0, n - T + 1 if stride == 1 else n // T * T, stride))
    with feed(ds, window=T, stride=stride, batch_size=32, epochs=2, seed=1) as f:
        got = batches(f)
    for e in (0, 1):
        starts = np.concatenate([b["indices"][:, 0] for b in got if b["epoch"] == e])
        assert sorted(starts.tolist()) == want
    first = np.concatenate([b["indices"][:, 0] for b in got if b["epoch"] == 0])
    second = np.concatenate([b["indices"][:, 0] for b in got if b["epoch"] == 1])
    assert not np.array_equal(first, second)  # reshuffled each epoch


def test_short_runs_are_skipped_or_padded(ds):
    T = 70
    runs = runs_of(ds)
    short = [(f, n) for f, n in runs if n < T]
    assert short and any(n >= T for _, n in runs)
    with feed(ds, window=T, stride=T, batch_size=4, epochs=1, shuffle=False) as f:
        skipped = batches(f)
    assert sum(len(b["indices"]) for b in skipped) == sum(n // T for _, n in runs)
    with feed(ds, window=T, stride=T, short="pad", batch_size=4, epochs=1,
              shuffle=False) as f:
        padded = batches(f)
    windows = [(w, v) for b in padded for w, v in zip(b["indices"], b["valid"])]
    assert len(windows) == sum(max(1, n // T) for _, n in runs)
    for (f, n) in short:
        w, v = next((w, v) for w, v in windows if w[0] == f)
        assert v.sum() == n and v[:n].all() and not v[n:].any()
        assert np.all(w[n:] == f + n - 1)  # the last step, repeated
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="windows of 500 steps"):
        feed(ds, window=500)


def test_draws_with_replacement_are_endless_and_follow_the_seed(ds):
    with feed(ds, batch_size=64, replacement=True, seed=3, epochs=1) as f:
        a = batches(f, 40)
        assert f.stats()["batches_per_epoch"] == 0
    with feed(ds, batch_size=64, replacement=True, seed=3, threads=2) as f:
        b = batches(f, 40)
    with feed(ds, batch_size=64, replacement=True, seed=4) as f:
        c = batches(f, 40)
    assert len(a) == 40  # endless: epochs does not end it
    assert all(np.array_equal(x["indices"], y["indices"]) for x, y in zip(a, b))
    assert not all(np.array_equal(x["indices"], y["indices"]) for x, y in zip(a, c))
    seen = np.concatenate([x["indices"] for x in a])
    assert seen.min() >= 0 and seen.max() < len(ds)
    # Uniform: 2 560 draws over the rows cover most of them.
    assert len(np.unique(seen)) > 0.5 * min(len(ds), len(seen))


def test_recent_reads_only_the_newest_rows(ds):
    K = 300
    with feed(ds, batch_size=64, replacement=True, recent=K) as f:
        got = np.concatenate([b["indices"] for b in batches(f, 20)])
    assert got.min() >= len(ds) - K
    with feed(ds, window=8, batch_size=16, recent=K, epochs=1) as f:
        w = np.concatenate([b["indices"] for b in batches(f)])
    assert w.min() >= len(ds) - K
    with pytest.raises(ValueError, match="recent"):
        feed(ds, recent=0)


def test_ranks_take_disjoint_parts_of_every_batch(ds):
    ref = batches(feed(ds, window=8, batch_size=10, epochs=1, seed=2))
    parts = [batches(feed(ds, window=8, batch_size=10, epochs=1, seed=2, rank=r, world=3))
             for r in range(3)]
    for k, whole in enumerate(ref):
        joined = np.concatenate([p[k]["indices"] for p in parts])
        assert np.array_equal(joined, whole["indices"])


@pytest.mark.parametrize("kw", [dict(window=8, batch_size=16), dict(replacement=True,
                                batch_size=50), dict(window=4, stride=4, short="pad",
                                                     batch_size=9, replacement=True)])
def test_a_state_resumes_exactly(ds, kw):
    with feed(ds, seed=5, **kw) as f:
        ref = batches(f, 30)
    for cut in (1, 7, 29):
        with feed(ds, seed=5, threads=2, **kw) as f:
            batches(f, cut)
            state = f.state_dict()
        with feed(ds, seed=5, **kw) as g:
            g.load_state_dict(state)
            rest = batches(g, 30 - cut)
        for x, y in zip(rest, ref[cut:]):
            assert (x["epoch"], x["batch"]) == (y["epoch"], y["batch"])
            assert np.array_equal(x["indices"], y["indices"])
    with feed(ds, seed=5, window=6, batch_size=16) as h:
        with pytest.raises(a2pack.errors.InvalidArgumentError):
            h.load_state_dict(state)
    with a2pack.Feed(ds, pin="off") as e:
        with pytest.raises(a2pack.errors.InvalidArgumentError, match="replay order"):
            e.load_state_dict(state)


def test_the_replay_example_runs_and_resumes_exactly(tmp_path):
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "replay_windows.py"
    spec = importlib.util.spec_from_file_location("replay_windows", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(["--out", str(tmp_path / "r"), "--games", "8", "--steps", "8"])
    assert out["rows"] > 0 and len(out["losses"]) == 16
    assert np.allclose(out["after"], out["resumed"])
