"""Datasets that upstream's `dataset` tool appended to, with the CLI and the
Python reader: the next `a2pack dataset append` must never delete upstream's
rows, taking them for an interrupted append of its own.

Upstream's append is reproduced from its documented behaviour, with numpy and
sqlite3 only: steps.npy rewritten with every old row plus the new rows, whose
run_id is the run's position in the batch (0, 1, ...); runs inserted with
id = MAX(id) + 1 + position and first_step_idx after the old rows, engine
'' when absent; manifest.json untouched."""

import json
import os
import pathlib
import sqlite3
import subprocess

import numpy as np
import pytest

import a2pack
from test_dataset import expected_rows, make_run, write_runs


from cli_util import CLI


def cli(*args, ok=True):
    p = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def upstream_append(ds, runs):
    old = np.load(ds / "steps.npy")
    new = expected_rows(runs, first_id=0)  # run-local ids
    tmp = ds / "steps.npy.up"
    with open(tmp, "wb") as f:
        np.save(f, np.concatenate([old, new]))
    os.replace(tmp, ds / "steps.npy")
    con = sqlite3.connect(ds / "metadata.db")
    (max_id,) = con.execute("SELECT COALESCE(MAX(id), -1) FROM runs").fetchone()
    first = len(old)
    for k, r in enumerate(runs):
        con.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                    (max_id + 1 + k, first, len(r), r.meta.max_score, r.meta.highest_tile,
                     r.meta.engine_str or "", r.meta.start_unix_s, r.meta.elapsed_s))
        con.commit()
        first += len(r)
    con.close()
    return max_id + 1


def batch(seed, n):
    return [make_run(seed + i, 2 + (seed + i) % 9) for i in range(n)]


def expect(ds, parts):
    """parts: (runs, first_id, local)"""
    want = np.concatenate([expected_rows(r, 0 if local else first) for r, first, local in parts])
    d = a2pack.Dataset(ds)
    np.testing.assert_array_equal(d.steps, want)
    assert len(d.run_ids()) == sum(len(r) for r, _, _ in parts)
    row = 0
    for r, first, _ in parts:
        for k, run in enumerate(r):
            idx = d.filter_sql("id = ?", (first + k,))
            np.testing.assert_array_equal(idx, np.arange(row, row + len(run)))
            row += len(run)
    rep = a2pack.verify_dataset(ds)
    assert rep["ok"], rep
    local = any(loc for _, _, loc in parts)
    assert any("run-local run_ids" in w for w in rep["warnings"]) == local


@pytest.mark.parametrize("order", ["a2pack-then-upstream", "upstream-then-a2pack", "interleaved"])
def test_append_orders_keep_every_row(tmp_path, order):
    ds = tmp_path / "ds"
    parts = []
    n = 0

    def a2(runs):
        nonlocal n
        d = tmp_path / f"in{len(parts)}"
        write_runs(d, runs)
        if not ds.exists():
            p = cli("dataset", "build", "--input", d, "--out", ds)
        else:
            p = cli("dataset", "append", "--dataset", ds, "--input", d)
        parts.append((runs, n, False))
        n += len(runs)
        return p

    def up(runs):
        nonlocal n
        if not ds.exists():
            ds.mkdir()
            np.save(ds / "steps.npy", np.zeros(0, dtype=a2pack.dataset.STEP_DTYPE))
            con = sqlite3.connect(ds / "metadata.db")
            con.executescript("""
                CREATE TABLE runs (id INTEGER PRIMARY KEY, first_step_idx INTEGER NOT NULL,
                  num_steps INTEGER NOT NULL, max_score INTEGER NOT NULL,
                  highest_tile INTEGER NOT NULL, engine TEXT, start_time INTEGER, elapsed_s REAL);
                CREATE INDEX idx_runs_score ON runs(max_score);
                CREATE INDEX idx_runs_len ON runs(num_steps);""")
            con.close()
        first = upstream_append(ds, runs)
        assert first == n
        parts.append((runs, n, n != 0))
        n += len(runs)

    steps = {"a2pack-then-upstream": [a2, up, a2],
             "upstream-then-a2pack": [up, a2, up, a2],
             "interleaved": [a2, up, up, a2, up, a2, a2]}[order]
    for i, step in enumerate(steps):
        p = step(batch(10 * i + 1, 3))
        if step is a2 and i > 0 and steps[i - 1] is up and a2 in steps[:i]:
            # The append said what it kept that it did not write (a dataset
            # upstream built, without a manifest, is described silently).
            assert "warning:" in p.stderr and "adopted " in p.stderr, p.stderr
        expect(ds, parts)
    stats = json.loads(cli("dataset", "stats", "--dataset", ds, "--json").stdout)
    assert stats["runs"] == n
    v = cli("dataset", "verify", "--dataset", ds)
    assert ("run-local" in v.stderr) == any(loc for _, _, loc in parts)


def test_unadoptable_runs_are_refused_and_kept(tmp_path):
    write_runs(tmp_path / "a", batch(1, 3))
    write_runs(tmp_path / "b", batch(9, 2))
    ds = tmp_path / "ds"
    cli("dataset", "build", "--input", tmp_path / "a", "--out", ds)
    con = sqlite3.connect(ds / "metadata.db")
    con.execute("INSERT INTO runs VALUES (3, 5000, 7, 1, 2, 'x', 0, 0.0)")
    con.commit()
    p = cli("dataset", "append", "--dataset", ds, "--input", tmp_path / "b", ok=False)
    assert p.returncode != 0
    assert "cannot be adopted" in p.stderr and "--discard-unrecorded" in p.stderr, p.stderr
    assert con.execute("SELECT COUNT(*) FROM runs WHERE id = 3").fetchone() == (1,)
    assert cli("dataset", "verify", "--dataset", ds, "--discard-unrecorded", ok=False).returncode != 0
    cli("dataset", "verify", "--dataset", ds, "--repair", "--discard-unrecorded")
    assert con.execute("SELECT COUNT(*) FROM runs WHERE id = 3").fetchone() == (0,)
    cli("dataset", "append", "--dataset", ds, "--input", tmp_path / "b")
    expect(ds, [(batch(1, 3), 0, False), (batch(9, 2), 3, False)])
