"""Step datasets through Python: the files (np.load, sqlite3), build, append,
gathers, selection, sampling, crash safety and bad input."""

import io
import json
import multiprocessing
import os
import pickle
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import a2pack
from a2pack.dataset import STEP_DTYPE
from a2pack.run import Meta


def make_run(seed, n, branches=True, engine="py"):
    rng = np.random.default_rng(seed)
    boards = rng.integers(0, 2**63, size=n, dtype=np.uint64)
    moves = rng.integers(0, 4, size=n, dtype=np.uint8)
    meta = Meta(steps=n, start_unix_s=1_700_000_000 + seed, elapsed_s=0.5 + seed,
                max_score=1000 + 100 * seed, highest_tile=[512, 1024, 2048][seed % 3],
                engine_str=engine)
    if not branches:
        return a2pack.RunV2.from_arrays(meta, boards, moves, final_board=seed)
    legal = rng.integers(0, 16, size=n, dtype=np.uint8) | (1 << moves).astype(np.uint8)
    values = rng.uniform(-0.3, 1.3, size=(n, 4)).astype(np.float32)
    return a2pack.RunV2.from_arrays(meta, boards, moves, values, legal, final_board=seed)


def write_runs(folder, runs, first=0):
    folder.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(runs):
        r.save(folder / f"run-{first + i:06d}.a2run2")


def expected_rows(runs, first_id=0):
    """docs/dataset.md computed here, independently of the library."""
    rows = []
    for k, r in enumerate(runs):
        vals, legal = r.branch_values, r.legal_masks
        for i in range(len(r)):
            mv = int(r.moves[i])
            ev = np.zeros(4, np.float32)
            if r.branch_present[i]:
                mask = int(legal[i])
                for m in range(4):
                    if mask >> m & 1:
                        ev[m] = 1.0 if m == mv else min(max(float(vals[i, m]), 0.0), 1.0)
            else:
                mask = 1 << mv
                ev[mv] = 1.0
            rows.append((int(r.boards[i]), mv, mask, ev, first_id + k, i))
    return np.array(rows, dtype=STEP_DTYPE)


@pytest.fixture
def runs():
    return [make_run(s, n) for s, n in enumerate([23, 1, 0, 150, 40, 7])]


@pytest.fixture
def built(tmp_path, runs):
    write_runs(tmp_path / "runs", runs)
    a2pack.build_dataset(tmp_path / "runs", tmp_path / "ds", workers=2)
    return tmp_path / "ds"


# ------------------------------------------------------------------ files
def test_files_load_with_plain_numpy_and_sqlite(built, runs):
    steps = np.load(built / "steps.npy")
    assert steps.dtype == STEP_DTYPE
    assert steps.dtype.itemsize == 32
    assert steps.shape == (sum(len(r) for r in runs),)
    # np.save of the same array writes the very same bytes (header included).
    buf = io.BytesIO()
    np.save(buf, steps)
    raw = (built / "steps.npy").read_bytes()
    assert buf.getvalue() == raw
    assert len(raw) - 32 * len(steps) == 256  # data on a 64-byte boundary

    want = expected_rows(runs)
    for name in STEP_DTYPE.names:
        np.testing.assert_array_equal(steps[name], want[name], err_msg=name)
    chosen = steps["ev_values"][np.arange(len(steps)), steps["move"]]
    legal_chosen = (steps["ev_legal"] >> steps["move"]) & 1 == 1
    assert (chosen[legal_chosen] == 1.0).all()

    con = sqlite3.connect(built / "metadata.db")
    rows = con.execute("SELECT id, first_step_idx, num_steps, max_score, highest_tile, engine, "
                       "start_time, elapsed_s FROM runs ORDER BY id").fetchall()
    first = 0
    for k, (r, row) in enumerate(zip(runs, rows)):
        m = r.meta
        assert row == (k, first, len(r), m.max_score, m.highest_tile, m.engine_str,
                       m.start_unix_s, pytest.approx(m.elapsed_s))
        first += len(r)
    idx = {x[0] for x in con.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"idx_runs_score", "idx_runs_len"} <= idx

    man = json.loads((built / "manifest.json").read_text())
    assert man["rows"] == len(steps) and man["runs"] == len(runs)
    assert man["format_version"] == 1 and man["next_run_id"] == len(runs)
    assert man["sources"][0]["kind"] == "dir"
    assert sorted(os.listdir(built)) == ["manifest.json", "metadata.db", "steps.npy"]


def test_runs_without_branches_need_the_flag(tmp_path):
    runs = [make_run(1, 5), make_run(2, 6, branches=False)]
    write_runs(tmp_path / "runs", runs)
    with pytest.raises(a2pack.InvalidArgumentError, match="run-000001.a2run2.*allow-missing-branches"):
        a2pack.build_dataset(tmp_path / "runs", tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
    a2pack.build_dataset(tmp_path / "runs", tmp_path / "ds", allow_missing_branches=True)
    steps = np.load(tmp_path / "ds" / "steps.npy")
    np.testing.assert_array_equal(steps, expected_rows(runs))
    tail = steps[5:]
    assert (tail["ev_legal"] == (1 << tail["move"])).all()


def test_build_refuses_an_existing_folder_unless_overwrite(built, tmp_path, runs):
    write_runs(tmp_path / "other", [make_run(9, 4)])
    with pytest.raises(a2pack.InvalidArgumentError, match="already exists"):
        a2pack.build_dataset(tmp_path / "other", built)
    a2pack.build_dataset(tmp_path / "other", built, overwrite=True)
    assert len(a2pack.Dataset(built)) == 4


# ------------------------------------------------------------------ Dataset
def test_steps_view_and_batches(built, runs):
    ds = a2pack.Dataset(built)
    assert len(ds) == sum(len(r) for r in runs) and ds.num_runs == len(runs)
    steps = ds.steps
    assert steps.dtype == STEP_DTYPE and not steps.flags.writeable
    assert steps.ctypes.data % 64 == 0
    np.testing.assert_array_equal(steps, np.load(built / "steps.npy"))
    with pytest.raises(ValueError):
        steps["move"][0] = 1

    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(ds), size=1000)
    np.testing.assert_array_equal(ds.get_batch(idx), steps[idx])
    np.testing.assert_array_equal(ds.get_batch(idx, workers=2), steps[idx])
    np.testing.assert_array_equal(ds.get_batch(list(idx[:5].astype(np.int32))), steps[idx[:5]])
    out = np.empty(len(idx), STEP_DTYPE)
    assert ds.get_batch(idx, out=out) is out
    # The same out array again (its pointer is reused), then another one,
    # then the first made read-only: refused, not written.
    idx2 = idx[::-1].copy()
    assert ds.get_batch(idx2, out=out, workers=2) is out
    np.testing.assert_array_equal(out, steps[idx2])
    other = np.zeros(len(idx), STEP_DTYPE)
    ds.get_batch(idx, out=other)
    np.testing.assert_array_equal(other, steps[idx])
    np.testing.assert_array_equal(ds.get_batch(idx, out=out), steps[idx])
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ds.get_batch(idx2, out=out)
    np.testing.assert_array_equal(out, steps[idx])

    exps, moves, legal, ev = ds.get_batch_columns(idx)
    rows = steps[idx]
    assert exps.shape == (1000, 16) and exps.dtype == np.uint8
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    np.testing.assert_array_equal(exps, ((rows["board"][:, None] >> shifts) & 0xF).astype(np.uint8))
    np.testing.assert_array_equal(moves, rows["move"])
    assert legal.dtype == np.bool_ and legal.shape == (1000, 4)
    np.testing.assert_array_equal(legal, (rows["ev_legal"][:, None] >> np.arange(4)) & 1 == 1)
    np.testing.assert_array_equal(ev, rows["ev_values"])
    e2 = tuple(np.empty_like(a) for a in (exps, moves, legal, ev))
    assert ds.get_batch_columns(idx, out=e2)[0] is e2[0]

    with pytest.raises(a2pack.OutOfRangeError, match="position 1"):
        ds.get_batch([0, len(ds)])
    with pytest.raises(IndexError):
        ds.get_batch_columns([-1])
    with pytest.raises(TypeError):
        ds.get_batch([0.5])
    assert ds.get_batch([]).shape == (0,)


def test_mmap_mode_and_close(built):
    a = a2pack.Dataset(built, mmap=True)
    assert a.info["mapped"]
    np.testing.assert_array_equal(a.steps, np.load(built / "steps.npy"))
    view = a.steps
    a.close()
    assert view[0]["board"] == np.load(built / "steps.npy")[0]["board"]  # still valid
    with pytest.raises(a2pack.ClosedError):
        a.get_batch([0])
    with a2pack.Dataset(built) as b:
        assert len(b.get_batch([0, 1])) == 2


def test_filters_and_split(tmp_path):
    runs = [make_run(s, 5 + s % 4, engine="even" if s % 2 == 0 else "odd") for s in range(30)]
    write_runs(tmp_path / "runs", runs)
    a2pack.build_dataset(tmp_path / "runs", tmp_path / "ds")
    ds = a2pack.Dataset(tmp_path / "ds")
    steps = ds.steps
    sel = ds.filter_by_score(1500, 1900)  # max_score = 1000 + 100 * seed
    assert sel.dtype == np.int64 and sel.flags.writeable
    assert set(np.unique(steps["run_id"][sel])) == {5, 6, 7, 8, 9}
    assert (np.diff(sel) > 0).all()
    assert set(np.unique(steps["run_id"][ds.filter_by_score(lo=3800)])) == {28, 29}
    assert set(np.unique(steps["run_id"][ds.filter_by_score(hi=1100)])) == {0, 1}
    assert len(ds.filter_sql("")) == len(ds)
    odd = ds.filter_sql("engine = ? AND num_steps >= ?", ["odd", 7])
    assert set(np.unique(steps["run_id"][odd])) == {s for s in range(30) if s % 2 and 5 + s % 4 >= 7}
    assert ds.filter_sql("max_score > ?", [1e9]).size == 0
    np.testing.assert_array_equal(ds.run_ids("id < ?", [3]), [0, 1, 2])
    with pytest.raises(a2pack.InvalidArgumentError, match="metadata.db.*no such column"):
        ds.filter_sql("bogus = 1")
    with pytest.raises(a2pack.InvalidArgumentError, match="parameters"):
        ds.filter_sql("id = ?")
    with pytest.raises(TypeError):
        ds.filter_sql("id = ?", [object()])

    train, val = ds.split(0.3, seed=5)
    assert len(train) + len(val) == len(ds)
    assert not set(steps["run_id"][train]) & set(steps["run_id"][val])
    t2, v2 = ds.split(0.3, seed=5)
    np.testing.assert_array_equal(v2, val)
    train, val = ds.split(where="engine = ?", params=["odd"], val_where="id >= ?", val_params=[25])
    assert set(steps["run_id"][val]) == {25, 27, 29}
    assert set(steps["run_id"][train]) == {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}

    st = ds.stats()
    assert st["rows"] == len(ds) and st["runs"] == 30
    assert sum(st["moves"].values()) == len(ds)
    assert st["engines"] == {"even": 15, "odd": 15}


def test_sampler_determinism(built):
    ds = a2pack.Dataset(built)
    a = ds.sampler(batch_size=16, seed=7)
    b = ds.sampler(batch_size=16, seed=7)
    c = ds.sampler(batch_size=16, seed=8)
    ba, bb, bc = list(a), list(b), list(c)
    assert len(ba) == len(a) == -(-len(ds) // 16)
    for x, y in zip(ba, bb):
        np.testing.assert_array_equal(x, y)
    assert any((x != y).any() for x, y in zip(ba, bc) if len(x) == len(y))
    np.testing.assert_array_equal(np.sort(np.concatenate(ba)), np.arange(len(ds)))
    a.set_epoch(1)
    e1 = list(a)
    assert any((x != y).any() for x, y in zip(e1, ba))
    # A pickled sampler continues the same epoch.
    a2 = pickle.loads(pickle.dumps(a))
    assert a2.epoch == 1
    for x, y in zip(a2, e1):
        np.testing.assert_array_equal(x, y)
    sel = ds.filter_by_score(1100, 1400)
    s = a2pack.EpochSampler(sel, batch_size=10, seed=1, drop_last=True)
    got = np.concatenate(list(s))
    assert len(got) == len(sel) // 10 * 10 and set(got) <= set(sel)
    assert len(a2pack.EpochSampler([], batch_size=4)) == 0


def _gather_in_child(ds, idx):
    return ds.get_batch(idx)


def test_dataset_pickles_by_path_into_worker_processes(built):
    ds = a2pack.Dataset(built)
    assert len(pickle.dumps(ds)) < 1000  # the path, not the rows
    ctx = multiprocessing.get_context("spawn")
    idx = np.arange(0, len(ds), 3)
    with ctx.Pool(2) as pool:
        got = pool.starmap(_gather_in_child, [(ds, idx), (ds, idx[::-1])])
    np.testing.assert_array_equal(got[0], ds.steps[idx])
    np.testing.assert_array_equal(got[1], ds.steps[idx[::-1]])


# ------------------------------------------------------------------ append, crash safety
def test_append_then_verify(built, tmp_path, runs):
    more = [make_run(40 + s, 3 + s) for s in range(4)]
    write_runs(tmp_path / "more", more)
    before = len(a2pack.Dataset(built))
    r = a2pack.append_dataset(built, tmp_path / "more")
    assert r["runs_added"] == 4 and r["total_runs"] == len(runs) + 4
    steps = np.load(built / "steps.npy")
    np.testing.assert_array_equal(steps[:before], expected_rows(runs))
    np.testing.assert_array_equal(steps[before:], expected_rows(more, first_id=len(runs)))
    con = sqlite3.connect(built / "metadata.db")
    assert con.execute("SELECT first_step_idx FROM runs WHERE id = ?", (len(runs),)).fetchone() == (before,)
    rep = a2pack.verify_dataset(built)
    assert rep["ok"] and rep["rows"] == len(steps) and rep["runs"] == len(runs) + 4
    assert sorted(os.listdir(built)) == ["manifest.json", "metadata.db", "steps.npy"]


# The named points of each way of writing steps.npy (docs/dataset.md).
_COMMON_POINTS = ["append:rows-partial", "append:steps-synced", "append:journal-written",
                  "append:db-inserted", "append:db-committed", "append:steps-installed",
                  "append:manifest-synced", "append:committed"]
CRASH_POINTS = ([("in-place", p) for p in ["append:tail-claimed"] + _COMMON_POINTS]
                + [("copy", p) for p in ["append:old-rows-copied"] + _COMMON_POINTS])

APPEND_SCRIPT = textwrap.dedent("""
    import sys, a2pack
    a2pack.append_dataset(sys.argv[1], sys.argv[2], workers=1, copy=sys.argv[3] == "copy")
""")


def _append_in_child(ds, more, env_extra=None, mode="in-place"):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.Popen([sys.executable, "-c", APPEND_SCRIPT, str(ds), str(more), mode], env=env)


def _content(ds_dir):
    ds = a2pack.Dataset(ds_dir)
    rep = a2pack.verify_dataset(ds_dir)
    assert rep["ok"], rep
    return ds.steps.copy(), ds.run_ids().tolist()


@pytest.fixture(scope="module")
def crash_runs(tmp_path_factory):
    """Run folders (written once: every file is fsynced) and the dataset's
    content before and after an uninterrupted append."""
    tmp = tmp_path_factory.mktemp("crash")
    base = [make_run(s, 8 + s) for s in range(5)]
    more = [make_run(100 + s, 1 + s % 6) for s in range(300)]  # two decode rounds
    write_runs(tmp / "runs", base)
    write_runs(tmp / "more", more)
    a2pack.build_dataset(tmp / "runs", tmp / "ref")
    old = _content(tmp / "ref")
    a2pack.append_dataset(tmp / "ref", tmp / "more")
    new = _content(tmp / "ref")
    return tmp, old, new


@pytest.fixture
def crash_setup(crash_runs, tmp_path):
    src, old, new = crash_runs
    (tmp_path / "runs").symlink_to(src / "runs")
    (tmp_path / "more").symlink_to(src / "more")
    return tmp_path, old, new


def _same(a, b):
    return len(a[0]) == len(b[0]) and (a[0] == b[0]).all() and a[1] == b[1]


@pytest.mark.parametrize("mode,point", CRASH_POINTS)
def test_append_crash_at_named_points(crash_setup, mode, point):
    tmp, old, new = crash_setup
    ds = tmp / f"ds-{mode}-{point.replace(':', '-')}"
    a2pack.build_dataset(tmp / "runs", ds)
    p = _append_in_child(ds, tmp / "more", {"A2PACK_TEST_CRASH_AT": point}, mode)
    assert p.wait(timeout=120) == 86
    got = _content(ds)
    assert _same(got, new if point == "append:committed" else old)
    # numpy reads the committed rows at any point (an in-place append's
    # uncommitted tail lies past the rows the header declares).
    steps = np.load(ds / "steps.npy", mmap_mode="r")
    assert (steps[:len(got[0])] == got[0]).all()
    # The next append completes the job.
    if point != "append:committed":
        a2pack.append_dataset(ds, tmp / "more")
        assert _same(_content(ds), new)
        assert sorted(os.listdir(ds)) == ["manifest.json", "metadata.db", "steps.npy"]


@pytest.mark.parametrize("mode", ["in-place", "copy"])
def test_append_killed_at_random_times(crash_setup, mode):
    tmp, old, new = crash_setup
    t0 = time.perf_counter()
    probe = tmp / f"probe-{mode}"
    a2pack.build_dataset(tmp / "runs", probe)
    assert _append_in_child(probe, tmp / "more", mode=mode).wait(timeout=120) == 0
    duration = time.perf_counter() - t0
    rnd = random.Random(1234)
    outcomes = set()
    for k in range(6):
        ds = tmp / f"kill-{mode}-{k}"
        a2pack.build_dataset(tmp / "runs", ds)
        p = _append_in_child(ds, tmp / "more", mode=mode)
        time.sleep(rnd.uniform(0, duration))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=120)
        got = _content(ds)
        assert _same(got, old) or _same(got, new)
        outcomes.add("new" if _same(got, new) else "old")
        a2pack.verify_dataset(ds, repair=True)
        assert _same(_content(ds), got)
    assert outcomes  # which ones occurred depends on timing


# ------------------------------------------------------------------ bad input
def test_bad_folders_give_clear_errors(built):
    steps_path, db_path, man_path = built / "steps.npy", built / "metadata.db", built / "manifest.json"
    raw, man = steps_path.read_bytes(), man_path.read_text()

    (built / "extra.txt").write_text("x")
    with pytest.raises(a2pack.CorruptError, match="extra.txt.*unexpected file"):
        a2pack.Dataset(built)
    assert len(a2pack.Dataset(built, allow_extra_files=True)) > 0
    (built / "extra.txt").unlink()

    steps_path.write_bytes(raw[:-5])
    with pytest.raises(a2pack.CorruptError, match="steps.npy.*truncated"):
        a2pack.Dataset(built)
    bad = bytearray(raw)
    bad[300] ^= 0xFF
    steps_path.write_bytes(bytes(bad))
    with pytest.raises(a2pack.ChecksumError, match="steps.npy.*CRC32C"):
        a2pack.Dataset(built)
    assert len(a2pack.Dataset(built, verify=False)) > 0
    with pytest.raises(a2pack.ChecksumError):
        a2pack.verify_dataset(built)
    rep = a2pack.verify_dataset(built, raise_on_error=False)
    assert not rep["ok"] and "CRC32C" in rep["errors"][0]

    # A dtype other than the step dtype, written by numpy itself.
    other = np.zeros(3, dtype=[("board", "<u8"), ("move", "u1"), ("ev_legal", "u1"),
                               ("ev_values", "<f4", (4,)), ("run_id", "<u4"), ("step_index", "<u4")])
    np.save(steps_path, other)
    with pytest.raises(a2pack.UnsupportedError, match="steps.npy.*'step_index' has type '<u4'"):
        a2pack.Dataset(built)
    np.save(steps_path, np.zeros(3, dtype=STEP_DTYPE).astype(
        np.dtype({"names": STEP_DTYPE.names, "formats": [STEP_DTYPE[n] for n in STEP_DTYPE.names],
                  "offsets": [0, 8, 9, 12, 28, 32], "itemsize": 40})))
    with pytest.raises(a2pack.UnsupportedError, match="steps.npy"):
        a2pack.Dataset(built)
    steps_path.write_bytes(raw)

    con = sqlite3.connect(db_path)
    con.execute("UPDATE runs SET num_steps = num_steps + 1 WHERE id = 0")
    con.commit()
    with pytest.raises(a2pack.CorruptError, match="row counts disagree"):
        a2pack.Dataset(built)
    con.execute("UPDATE runs SET num_steps = num_steps - 1 WHERE id = 0")
    con.commit()
    con.close()

    man_path.write_text(man.replace('"runs": 6', '"runs": 5'))
    with pytest.raises(a2pack.CorruptError, match="metadata.db.*manifest.json records 5"):
        a2pack.Dataset(built)
    man_path.write_text("{not json")
    with pytest.raises(a2pack.CorruptError, match="manifest.json"):
        a2pack.Dataset(built)
    man_path.write_text(man)

    db_path.rename(built.parent / "x.db")
    with pytest.raises(a2pack.NotFoundError, match="metadata.db"):
        a2pack.Dataset(built)
    (built.parent / "x.db").rename(db_path)
    assert len(a2pack.Dataset(built)) > 0
    with pytest.raises(FileNotFoundError):
        a2pack.Dataset(built / "nope")


def test_opens_a_dataset_written_the_upstream_way(tmp_path, runs):
    """Upstream's Python builder: np.save + sqlite3, no manifest."""
    d = tmp_path / "up"
    d.mkdir()
    arr = expected_rows(runs)
    np.save(d / "steps.npy", arr)
    con = sqlite3.connect(d / "metadata.db")
    con.executescript("""
        CREATE TABLE runs (id INTEGER PRIMARY KEY, first_step_idx INTEGER NOT NULL,
          num_steps INTEGER NOT NULL, max_score INTEGER NOT NULL,
          highest_tile INTEGER NOT NULL, engine TEXT, start_time INTEGER, elapsed_s REAL);
        CREATE INDEX idx_runs_score ON runs(max_score);
        CREATE INDEX idx_runs_len ON runs(num_steps);""")
    first = 0
    for k, r in enumerate(runs):
        con.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                    (k, first, len(r), r.meta.max_score, r.meta.highest_tile, "", 0, 0.0))
        first += len(r)
    con.commit()
    con.close()
    ds = a2pack.Dataset(d)
    np.testing.assert_array_equal(ds.steps, arr)
    assert not ds.info["has_manifest"]
    assert a2pack.verify_dataset(d)["ok"]
    write_runs(tmp_path / "more", [make_run(77, 5)])
    a2pack.append_dataset(d, tmp_path / "more")
    ds = a2pack.Dataset(d)
    assert ds.info["has_manifest"] and len(ds) == len(arr) + 5
    np.testing.assert_array_equal(ds.steps[len(arr):], expected_rows([make_run(77, 5)], len(runs)))
