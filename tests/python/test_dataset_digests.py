"""Run digests through Python: the documented SHA-256 of each run, computed
here with hashlib from steps.npy and metadata.db; the same game from v1 and
v2 files, a packfile and a bag record; appends (CLI, Python, Beam) that
refuse runs the dataset holds or that repeat each other; verify's report;
datasets written before digests existed."""

import hashlib
import json
import os
import shutil
import sqlite3
import struct
import subprocess

import numpy as np
import pytest

import a2pack
from a2pack import bag
from a2pack.dataset_rows import run_rows, write_dataset
from cli_util import cli_path
from test_dataset import make_run, write_runs


def documented_digests(ds):
    """docs/dataset.md "Run digests", computed from the dataset's own files."""
    steps = np.load(ds / "steps.npy") if (ds / "steps.npy").exists() else np.concatenate(
        [np.load(p) for p in sorted(ds.glob("steps-*.npy"))])
    raw = steps.view(np.uint8).reshape(-1, 32)
    con = sqlite3.connect(ds / "metadata.db")
    out = {}
    for (rid, first, n, score, tile, engine, start, elapsed) in con.execute(
            "SELECT id, first_step_idx, num_steps, max_score, highest_tile, engine, start_time, "
            "elapsed_s FROM runs ORDER BY id"):
        e = (engine or "").encode()
        h = hashlib.sha256(b"a2pack run digest 1\n")
        h.update(struct.pack("<QqqqdI", n, score, tile, start, elapsed, len(e)) + e)
        h.update(raw[first:first + n, :9].tobytes())  # board, move
        out[rid] = h.hexdigest()
    return out


def stored(ds):
    con = sqlite3.connect(ds / "metadata.db")
    return {rid: (d.hex(), dup) for rid, d, dup in
            con.execute("SELECT id, sha256, duplicate_of FROM run_digests ORDER BY id")}


def files(ds):
    return {p.name: p.read_bytes() for p in ds.iterdir()}


def drop_digests(ds):
    """The dataset as a2pack wrote it before it recorded digests."""
    con = sqlite3.connect(ds / "metadata.db")
    con.execute("DROP TABLE run_digests")
    con.commit()
    con.close()
    man = json.loads((ds / "manifest.json").read_text())
    man.pop("run_digests")
    man.pop("metadata_db")
    (ds / "manifest.json").write_text(json.dumps(man, indent=2))


def cli(*args):
    return subprocess.run([cli_path(), *map(str, args)], capture_output=True, text=True)


@pytest.fixture
def two(tmp_path):
    a = [make_run(s, n) for s, n in enumerate([23, 1, 0, 150])]
    b = [make_run(40 + s, n) for s, n in enumerate([12, 30, 7])]
    write_runs(tmp_path / "a", a)
    write_runs(tmp_path / "b", b)
    a2pack.build_dataset(tmp_path / "a", tmp_path / "ds", workers=2)
    a2pack.append_dataset(tmp_path / "ds", tmp_path / "b", workers=2)
    return tmp_path


def test_each_run_has_the_documented_digest(two):
    ds = two / "ds"
    want = documented_digests(ds)
    assert {k: v[0] for k, v in stored(ds).items()} == want
    assert len(set(want.values())) == 7
    assert json.loads((ds / "manifest.json").read_text())["run_digests"] == "sha256-v1"
    # Upstream's table keeps upstream's columns.
    cols = [r[1] for r in sqlite3.connect(ds / "metadata.db").execute("PRAGMA table_info(runs)")]
    assert cols == ["id", "first_step_idx", "num_steps", "max_score", "highest_tile", "engine",
                    "start_time", "elapsed_s"]


def test_the_same_game_from_v1_v2_a_pack_and_a_bag_has_one_digest(tmp_path):
    games = [make_run(s, n, branches=False) for s, n in enumerate([9, 31, 4])]
    write_runs(tmp_path / "v2", games)
    (tmp_path / "v1").mkdir()
    for i, g in enumerate(games):
        (tmp_path / "v1" / f"run-{i:06d}.a2run2").write_bytes(g.to_bytes("v1", drop_branches=True))
    a2pack.pack_dir(tmp_path / "v2", tmp_path / "runs.a2pack")
    with bag.Writer(str(tmp_path / "runs.bag")) as w:
        for g in games:
            w.write(g.to_bytes())
    records = list(bag.Reader(str(tmp_path / "runs.bag")))
    kw = dict(allow_missing_branches=True)
    for name, src in (("ds-v1", tmp_path / "v1"), ("ds-v2", tmp_path / "v2"),
                      ("ds-pack", tmp_path / "runs.a2pack")):
        a2pack.build_dataset(src, tmp_path / name, **kw)
    write_dataset(tmp_path / "ds-bag", [run_rows(r, **kw) for r in records])
    digests = [stored(tmp_path / n) for n in ("ds-v1", "ds-v2", "ds-pack", "ds-bag")]
    assert digests[0] == digests[1] == digests[2] == digests[3]
    assert {k: v[0] for k, v in digests[0].items()} == documented_digests(tmp_path / "ds-v2")
    # So the v1 files of games the dataset holds are refused.
    with pytest.raises(a2pack.InvalidArgumentError, match="3 of the 3 runs to append are already"):
        a2pack.append_dataset(tmp_path / "ds-v2", tmp_path / "v1", **kw)


def test_a_duplicate_append_is_refused_and_changes_nothing(two):
    ds = two / "ds"
    before = files(ds)
    for copy in (False, True):
        with pytest.raises(a2pack.InvalidArgumentError) as e:
            a2pack.append_dataset(ds, two / "b", copy=copy)
        msg = str(e.value)
        assert "3 of the 3 runs to append are already in the dataset" in msg
        assert f"{two / 'b'}/run-000000.a2run2 is run 4" in msg
        assert "Nothing was changed" in msg and "allow_duplicates=True" in msg
        assert files(ds) == before
    # The CLI says the same and exits with the usage status.
    p = cli("dataset", "append", "-d", ds, "-i", two / "b")
    assert p.returncode == 2, p.stderr
    assert "are already in the dataset" in p.stderr and "--allow-duplicates" in p.stderr
    assert files(ds) == before
    assert a2pack.verify_dataset(ds)["ok"]


def test_allow_duplicates_appends_and_verify_notes_them(two):
    ds = two / "ds"
    r = a2pack.append_dataset(ds, two / "b", allow_duplicates=True)
    assert r["runs_added"] == 3 and r["runs_duplicated"] == 3
    s = stored(ds)
    assert [s[i][1] for i in range(7, 10)] == [4, 5, 6]
    assert [s[i][0] for i in range(7, 10)] == [s[i][0] for i in range(4, 7)]
    rep = a2pack.verify_dataset(ds)
    assert rep["ok"]
    assert rep["duplicates"] == {"runs": 3, "allowed": 3, "listed": [
        {"id": 7, "same_as": 4, "allowed": True}, {"id": 8, "same_as": 5, "allowed": True},
        {"id": 9, "same_as": 6, "allowed": True}]}
    assert any("written knowingly" in n for n in rep["notes"])
    p = cli("dataset", "append", "-d", ds, "-i", two / "a", "--allow-duplicates", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["runs_duplicated"] == 4


def test_duplicates_within_one_append_or_build(two):
    ds = two / "ds"
    before = files(ds)
    g = make_run(77, 14)
    write_runs(two / "twice", [g, make_run(78, 3), g])
    with pytest.raises(a2pack.InvalidArgumentError,
                       match=r"1 of the 3 runs to append repeats an earlier run of this append.*"
                             r"run-000002\.a2run2 repeats .*run-000000\.a2run2"):
        a2pack.append_dataset(ds, two / "twice")
    assert files(ds) == before
    with pytest.raises(a2pack.InvalidArgumentError, match="1 of the 3 runs given repeats"):
        a2pack.build_dataset(two / "twice", two / "ds2")
    assert not (two / "ds2").exists()
    with pytest.raises(a2pack.InvalidArgumentError, match="run 2 repeats run 0"):
        write_dataset(two / "ds3", [run_rows(r) for r in (g, make_run(78, 3), g)])
    assert not (two / "ds3").exists()
    assert a2pack.build_dataset(two / "twice", two / "ds2",
                                allow_duplicates=True)["runs_duplicated"] == 1
    assert write_dataset(two / "ds3", [run_rows(r) for r in (g, g)],
                         allow_duplicates=True)["runs_duplicated"] == 1
    assert a2pack.append_dataset(ds, two / "twice", allow_duplicates=True)["runs_duplicated"] == 1
    assert stored(ds)[9][1] == 7


def test_verify_reports_runs_appended_twice_before_digests_existed(two):
    ds = two / "ds"
    a2pack.append_dataset(ds, two / "b", allow_duplicates=True)
    drop_digests(ds)  # as the report had it: appended twice, by a version without digests
    rep = a2pack.verify_dataset(ds, raise_on_error=False)
    assert not rep["ok"]
    assert rep["duplicates"]["runs"] == 3 and rep["duplicates"]["allowed"] == 0
    assert [d["id"] for d in rep["duplicates"]["listed"]] == [7, 8, 9]
    assert any("3 runs repeat earlier runs of the dataset" in e and "run 7 repeats run 4" in e
               for e in rep["errors"])
    assert rep["runs_without_digest"] == 10
    with pytest.raises(a2pack.InvalidArgumentError, match="run 8 repeats run 5"):
        a2pack.verify_dataset(ds)
    p = cli("dataset", "verify", "-d", ds)
    assert p.returncode == 1 and "repeat earlier runs" in p.stderr


def test_a_dataset_without_digests_opens_verifies_and_repair_adds_them(two):
    ds = two / "ds"
    want = documented_digests(ds)
    drop_digests(ds)
    assert len(a2pack.Dataset(ds)) == sum(1 for _ in np.load(ds / "steps.npy"))
    rep = a2pack.verify_dataset(ds)
    assert rep["ok"] and rep["runs_without_digest"] == 7
    assert any("have no content digest recorded" in n for n in rep["notes"])
    shutil.copytree(ds, two / "old")
    rep = a2pack.verify_dataset(ds, repair=True)
    assert rep["ok"] and rep["runs_without_digest"] == 0
    assert any("recorded the content digests of 7 runs" in a for a in rep["actions"])
    assert {k: v[0] for k, v in stored(ds).items()} == want
    assert json.loads((ds / "manifest.json").read_text())["run_digests"] == "sha256-v1"
    # An append records them first and then checks against them.
    with pytest.raises(a2pack.InvalidArgumentError, match="are already in the dataset"):
        a2pack.append_dataset(two / "old", two / "b")
    assert {k: v[0] for k, v in stored(two / "old").items()} == want
    write_runs(two / "c", [make_run(90, 5)])
    r = a2pack.append_dataset(two / "old", two / "c")
    assert r["runs_added"] == 1 and r["digests_recorded"] == 0


def test_an_append_to_a_dataset_without_digests_records_them_first(two):
    ds = two / "ds"
    drop_digests(ds)
    write_runs(two / "c", [make_run(90, 5)])
    r = a2pack.append_dataset(ds, two / "c")
    assert r["digests_recorded"] == 7 and r["runs_added"] == 1
    assert any("recorded the content digests of 7 runs" in n for n in r["notes"])
    assert {k: v[0] for k, v in stored(ds).items()} == documented_digests(ds)


def test_sharded_datasets(tmp_path):
    # (No run of 0 steps: a sharded build counts one in the manifest but in
    # no shard, a separate defect.)
    a = [make_run(s, n) for s, n in enumerate([23, 1, 150])]
    b = [make_run(40 + s, n) for s, n in enumerate([12, 30, 7])]
    write_runs(tmp_path / "a", a)
    write_runs(tmp_path / "b", b)
    ds = tmp_path / "ds"
    a2pack.build_dataset(tmp_path / "a", ds, shard_rows=64)
    a2pack.append_dataset(ds, tmp_path / "b")
    before = files(ds)
    with pytest.raises(a2pack.InvalidArgumentError, match="3 of the 3 runs to append are already"):
        a2pack.append_dataset(ds, tmp_path / "b")
    assert files(ds) == before
    assert {k: v[0] for k, v in stored(ds).items()} == documented_digests(ds)
    assert a2pack.append_dataset(ds, tmp_path / "b", allow_duplicates=True)["runs_duplicated"] == 3
    assert a2pack.verify_dataset(ds)["duplicates"]["allowed"] == 3
    drop_digests(ds)
    rep = a2pack.verify_dataset(ds, repair=True, raise_on_error=False)
    assert any("recorded the content digests of 9 runs" in x for x in rep["actions"])
    assert rep["duplicates"]["runs"] == 3 and not rep["ok"]


def test_beam_transforms_refuse_duplicates_naming_their_keys(two):
    beam = pytest.importorskip("apache_beam")
    from a2pack import beam as a2beam

    ds = two / "ds"
    before = files(ds)
    runs = [(p.name, p.read_bytes()) for p in sorted((two / "b").iterdir())]
    with pytest.raises(Exception, match=r"3 of the 3 runs to append are already in the dataset.*"
                                        r"run-000000\.a2run2 is run 4"):
        with beam.Pipeline() as p:
            _ = p | beam.Create(runs) | a2beam.AppendToDataset(ds)
    assert files(ds) == before
    with pytest.raises(Exception, match=r"repeats an earlier run of this input.*"
                                        r"run-000000\.a2run2"):
        with beam.Pipeline() as p:
            _ = (p | beam.Create(runs + [("z-copy", runs[0][1])])
                 | a2beam.BuildDataset(two / "ds2"))
    assert not (two / "ds2").exists()
    with beam.Pipeline() as p:
        _ = p | beam.Create(runs) | a2beam.AppendToDataset(ds, allow_duplicates=True)
    assert a2pack.verify_dataset(ds)["duplicates"]["allowed"] == 3
