"""Dataset writers under pressure: appends while Python threads re-open the
dataset in a loop (they used to fail at once with "locked"), and bad runs
skipped and reported by `dataset build/append --skip-bad` and `decode
--skip-bad` (they used to stop at the first)."""

import json
import threading

import numpy as np
import pytest

import a2pack
from test_dataset import expected_rows, make_run, write_runs
from test_dataset_foreign import cli


def test_appends_wait_for_readers_reopening_in_threads(tmp_path):
    base = [make_run(s, 60 + s) for s in range(150)]
    write_runs(tmp_path / "runs", base)
    ds = tmp_path / "ds"
    a2pack.build_dataset(tmp_path / "runs", ds)
    stop = threading.Event()
    opens, errors = [0], []

    def reader():
        while not stop.is_set():
            try:
                d = a2pack.Dataset(ds)
                assert len(d) > 0
                opens[0] += 1
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        all_runs = list(base)
        for k in range(3):
            more = [make_run(1000 + 10 * k + s, 5 + s) for s in range(4)]
            write_runs(tmp_path / f"more{k}", more)
            p = cli("dataset", "append", "--dataset", ds, "--input", tmp_path / f"more{k}",
                    "--lock-timeout", "-1")
            assert "appended 4 runs" in p.stderr
            # The same runs a second time, knowingly.
            r = a2pack.append_dataset(ds, tmp_path / f"more{k}", lock_timeout=None,
                                      allow_duplicates=True)
            assert r["runs_added"] == 4
            all_runs += more + more
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    assert opens[0] > 0
    np.testing.assert_array_equal(a2pack.Dataset(ds).steps, expected_rows(all_runs))


def test_lock_timeout_names_the_holder(tmp_path):
    write_runs(tmp_path / "runs", [make_run(1, 5)])
    ds = tmp_path / "ds"
    a2pack.build_dataset(tmp_path / "runs", ds)
    # A reader that is loading, as another process sees it: a shared flock on
    # the folder, held by this (the pytest) process.
    import fcntl
    import os
    fd = os.open(ds, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        p = cli("dataset", "append", "--dataset", ds, "--input", tmp_path / "runs",
                "--lock-timeout", "0.2", ok=False)
        assert p.returncode != 0
        assert f"pid {os.getpid()}" in p.stderr and "--lock-timeout" in p.stderr, p.stderr
    finally:
        os.close(fd)
    cli("dataset", "append", "--dataset", ds, "--input", tmp_path / "runs", "--allow-duplicates")


@pytest.fixture
def mixed(tmp_path):
    """Three good runs and two bad files between them: one truncated, one
    not a run at all."""
    good = [make_run(s, 4 + s) for s in range(3)]
    d = tmp_path / "mixed"
    write_runs(d, good)
    raw = (d / "run-000001.a2run2").read_bytes()
    (d / "run-000000x.a2run2").write_bytes(raw[: len(raw) // 2])
    (d / "run-000001x.a2run2").write_bytes(b"not a run file at all")
    return d, good


def test_dataset_build_and_append_skip_bad(tmp_path, mixed):
    d, good = mixed
    ds = tmp_path / "ds"
    p = cli("dataset", "build", "--input", d, "--out", ds, ok=False)
    assert p.returncode != 0 and "x.a2run2" in p.stderr
    assert not ds.exists()
    p = cli("dataset", "build", "--input", d, "--out", ds, "--skip-bad")
    for name in ("run-000000x.a2run2", "run-000001x.a2run2"):
        assert f"skipped {d / name}" in p.stderr, p.stderr
    assert "skipped 2 bad run(s)" in p.stderr
    np.testing.assert_array_equal(a2pack.Dataset(ds).steps, expected_rows(good))
    # The good runs again, knowingly: what --strict does is the point here.
    p = cli("dataset", "append", "--dataset", ds, "--input", d, "--skip-bad", "--strict",
            "--allow-duplicates", ok=False)
    assert p.returncode != 0 and "--strict" in p.stderr
    assert p.stderr.count("a2pack: skipped") == 2
    # The good runs were appended all the same, with ids after the first three.
    np.testing.assert_array_equal(a2pack.Dataset(ds).steps,
                                  np.concatenate([expected_rows(good), expected_rows(good, 3)]))
    r = a2pack.append_dataset(ds, d, skip_bad=True, allow_duplicates=True)
    assert r["runs_added"] == 3 and r["runs_skipped"] == 2
    assert sorted(x[0] for x in r["skipped"]) == [str(d / "run-000000x.a2run2"),
                                                   str(d / "run-000001x.a2run2")]
    assert a2pack.verify_dataset(ds)["ok"]


def test_decode_skip_bad(mixed):
    d, good = mixed
    p = cli("decode", "--input", d, ok=False)
    assert p.returncode != 0 and "x.a2run2" in p.stderr
    p = cli("decode", "--input", d, "--skip-bad", "--json")
    j = json.loads(p.stdout)
    assert j["runs"] == 3 and j["steps"] == sum(len(r) for r in good)
    assert sorted(x["file"] for x in j["skipped"]) == [str(d / "run-000000x.a2run2"),
                                                       str(d / "run-000001x.a2run2")]
    assert p.stderr.count("a2pack: skipped") == 2
    p = cli("decode", "--input", d, "--skip-bad", "--strict", ok=False)
    assert p.returncode != 0 and "skipped 2 bad file(s)" in p.stderr


def test_decode_walks_subfolders_and_follows_file_links_only(tmp_path):
    """Run files in subfolders count; a link to a run file counts as that
    file; a link to a folder is not walked into (no cycles); other names and
    folders named like run files do not count."""
    runs = [make_run(s, 2 + s) for s in range(5)]
    root = tmp_path / "root"
    write_runs(root, runs[:2])
    write_runs(root / "a" / "b", runs[2:4])
    write_runs(tmp_path / "elsewhere", runs[4:])
    (root / "link.a2run2").symlink_to(next((tmp_path / "elsewhere").glob("*.a2run2")))
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "dir.a2run2").mkdir()
    (root / "notes.txt").write_text("not a run")
    (root / "dangling.a2run2").symlink_to(tmp_path / "gone.a2run2")
    j = json.loads(cli("decode", "--input", root, "--json").stdout)
    assert j["runs"] == 5 and j["steps"] == sum(len(r) for r in runs)
    p = cli("decode", "--input", root / "notes.txt", ok=False)
    assert p.returncode == 1 and "not a folder" in p.stderr


def test_decode_streams_windows_and_adds_them_up(tmp_path):
    """More files than one decode window (256): the totals cover them all."""
    runs = [make_run(s, 1 + s % 13) for s in range(300)]
    write_runs(tmp_path / "many", runs)
    j = json.loads(cli("decode", "--input", tmp_path / "many", "--json").stdout)
    assert j["runs"] == 300
    assert j["steps"] == j["steps_with_branches"] == sum(len(r) for r in runs)
    assert j["min_len"] == 1 and j["max_len"] == 13
    assert sum(j["highest_tile_hist"].values()) == 300
