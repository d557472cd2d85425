"""Appends that extend steps.npy in place: what they write (the new rows, the
header, the new runs), what readers see meanwhile, the header as the count
grows, when they copy instead, and how a failed append takes its rows back.
Crash safety at every named point is in test_dataset.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import a2pack
from cli_util import cli_path
from test_dataset import expected_rows, make_run, write_runs


def _io_counters():
    """This process's write(2)-family byte count (/proc/self/io's wchar)."""
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


@pytest.fixture
def base(tmp_path):
    runs = [make_run(s, 200 + s) for s in range(40)]  # ~8 000 rows, 260 KB
    write_runs(tmp_path / "runs", runs)
    a2pack.build_dataset(tmp_path / "runs", tmp_path / "ds", workers=1)
    more = [make_run(500 + s, 3 + s) for s in range(5)]
    write_runs(tmp_path / "more", more)
    return tmp_path, runs, more


def test_append_extends_the_file_in_place_and_writes_only_the_new_rows(base):
    tmp, runs, more = base
    ds = tmp / "ds"
    steps = ds / "steps.npy"
    before = steps.read_bytes()
    ino = os.stat(steps).st_ino
    io0 = _io_counters()["wchar"]
    r = a2pack.append_dataset(ds, tmp / "more", workers=1)
    written = _io_counters()["wchar"] - io0
    assert r["steps_copied"] is False
    assert os.stat(steps).st_ino == ino  # the same file, not a new one
    after = steps.read_bytes()
    # The old rows are untouched, byte for byte; only the header's count changed.
    assert after[256:len(before)] == before[256:]
    assert len(after) == len(before) + 32 * r["rows_added"]
    # What went through write(2): the new rows, the header, the journal,
    # the manifest and SQLite's pages for the new runs - not the old rows.
    assert written < 32 * r["rows_added"] + 256 * 1024, written
    assert written < len(before) // 2
    got = np.load(steps)
    np.testing.assert_array_equal(got, np.concatenate([expected_rows(runs),
                                                       expected_rows(more, first_id=len(runs))]))
    assert a2pack.verify_dataset(ds)["ok"]
    assert sorted(os.listdir(ds)) == ["manifest.json", "metadata.db", "steps.npy"]


def test_copy_writes_a_new_file(base):
    tmp, runs, more = base
    ds = tmp / "ds"
    ino = os.stat(ds / "steps.npy").st_ino
    r = a2pack.append_dataset(ds, tmp / "more", workers=1, copy=True)
    assert r["steps_copied"] is True
    assert os.stat(ds / "steps.npy").st_ino != ino
    assert len(np.load(ds / "steps.npy")) == r["total_rows"]
    assert a2pack.verify_dataset(ds)["ok"]


@pytest.mark.parametrize("mmap", [False, True])
def test_readers_opened_before_keep_their_snapshot(base, mmap):
    tmp, runs, more = base
    ds = tmp / "ds"
    old = a2pack.Dataset(ds, mmap=mmap)
    n = len(old)
    snapshot = old.steps.copy()
    a2pack.append_dataset(ds, tmp / "more", workers=1)
    assert len(old) == n
    np.testing.assert_array_equal(old.steps, snapshot)
    np.testing.assert_array_equal(old.get_batch(np.arange(n)), snapshot)
    assert old.num_runs == len(runs)
    assert len(old.filter_sql("1 = 1")) == n and len(old.run_ids()) == len(runs)
    new = a2pack.Dataset(ds, mmap=mmap)
    assert len(new) == n + sum(len(r) for r in more)
    np.testing.assert_array_equal(new.steps[:n], snapshot)


def test_the_header_stays_valid_as_the_count_gains_digits(tmp_path):
    # 9 rows, then past 10, 100 and 1 000: the header keeps its length (numpy's
    # room for the count to grow) and numpy reads every state.
    write_runs(tmp_path / "r0", [make_run(1, 9)])
    a2pack.build_dataset(tmp_path / "r0", tmp_path / "ds", workers=1)
    expect = expected_rows([make_run(1, 9)])
    for k, n in enumerate([3, 95, 900, 9000]):
        write_runs(tmp_path / f"r{k + 1}", [make_run(10 + k, n)])
        r = a2pack.append_dataset(tmp_path / "ds", tmp_path / f"r{k + 1}", workers=1)
        assert r["steps_copied"] is False
        expect = np.concatenate([expect, expected_rows([make_run(10 + k, n)], first_id=k + 1)])
        with open(tmp_path / "ds" / "steps.npy", "rb") as f:
            assert np.lib.format.read_magic(f) == (1, 0)
            shape, _, _ = np.lib.format.read_array_header_1_0(f)
            assert f.tell() == 256 and shape == (len(expect),)
        np.testing.assert_array_equal(np.load(tmp_path / "ds" / "steps.npy"), expect)
    assert a2pack.verify_dataset(tmp_path / "ds")["ok"]


def test_a_hard_linked_file_is_copied_so_the_other_name_keeps_its_content(base):
    tmp, runs, more = base
    ds = tmp / "ds"
    os.link(ds / "steps.npy", tmp / "snapshot.npy")
    before = (tmp / "snapshot.npy").read_bytes()
    r = a2pack.append_dataset(ds, tmp / "more", workers=1)
    assert r["steps_copied"] is True
    assert (tmp / "snapshot.npy").read_bytes() == before
    assert len(np.load(ds / "steps.npy")) == r["total_rows"]
    # Now the only name of its file: the next append extends it.
    write_runs(tmp / "more2", [make_run(900, 4)])
    assert a2pack.append_dataset(ds, tmp / "more2", workers=1)["steps_copied"] is False


def test_a_symlinked_or_read_only_file_is_copied_and_its_target_kept(base):
    tmp, runs, more = base
    ds = tmp / "ds"
    # steps.npy a link to a file elsewhere: the target keeps its bytes.
    os.rename(ds / "steps.npy", tmp / "elsewhere.npy")
    os.symlink(tmp / "elsewhere.npy", ds / "steps.npy")
    before = (tmp / "elsewhere.npy").read_bytes()
    r = a2pack.append_dataset(ds, tmp / "more", workers=1)
    assert r["steps_copied"] is True and not os.path.islink(ds / "steps.npy")
    assert (tmp / "elsewhere.npy").read_bytes() == before
    # A file made read-only keeps its bytes (as root, the mode alone is not
    # enforced, so only the copy's result is checked there).
    os.chmod(ds / "steps.npy", 0o444)
    write_runs(tmp / "more2", [make_run(900, 4)])
    r = a2pack.append_dataset(ds, tmp / "more2", workers=1)
    assert r["steps_copied"] is (os.geteuid() != 0)
    assert len(np.load(ds / "steps.npy")) == r["total_rows"]
    assert a2pack.verify_dataset(ds)["ok"]


def test_another_header_length_is_copied_once_then_extended(base):
    # A valid NPY header of another length (here 64 bytes more padding, as
    # another writer may leave) puts row 0 elsewhere: the first append writes
    # a2pack's header, the next one extends in place.
    tmp, runs, more = base
    ds = tmp / "ds"
    raw = (ds / "steps.npy").read_bytes()
    hlen = int.from_bytes(raw[8:10], "little")
    text = raw[10:10 + hlen].rstrip(b" \n") + b" " * 64
    text = text.ljust(hlen + 64 - 1) + b"\n"
    (ds / "steps.npy").write_bytes(raw[:8] + len(text).to_bytes(2, "little") + text + raw[10 + hlen:])
    np.testing.assert_array_equal(np.load(ds / "steps.npy"), expected_rows(runs))
    assert a2pack.verify_dataset(ds)["ok"]
    assert a2pack.append_dataset(ds, tmp / "more", workers=1)["steps_copied"] is True
    write_runs(tmp / "more2", [make_run(900, 4)])
    assert a2pack.append_dataset(ds, tmp / "more2", workers=1)["steps_copied"] is False
    assert a2pack.verify_dataset(ds)["ok"]
    assert len(np.load(ds / "steps.npy")) == len(expected_rows(runs)) + sum(map(len, more)) + 4


def test_a_failed_append_takes_its_rows_back(base):
    tmp, runs, more = base
    ds = tmp / "ds"
    before = (ds / "steps.npy").read_bytes()
    db_before = (ds / "metadata.db").read_bytes()
    man_before = (ds / "manifest.json").read_text()
    # A corrupt run after good ones: its rows are decoded after theirs.
    bad = tmp / "bad"
    write_runs(bad, [make_run(700 + s, 50) for s in range(300)])
    raw = bytearray((bad / "run-000299.a2run2").read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (bad / "run-000299.a2run2").write_bytes(bytes(raw))
    with pytest.raises(a2pack.CorruptError, match="run-000299"):
        a2pack.append_dataset(ds, bad, workers=1)
    assert (ds / "steps.npy").read_bytes() == before
    assert (ds / "metadata.db").read_bytes() == db_before
    assert (ds / "manifest.json").read_text() == man_before
    assert sorted(os.listdir(ds)) == ["manifest.json", "metadata.db", "steps.npy"]
    # A stop asked for by the progress callback, the same.
    with pytest.raises(a2pack.errors.InterruptedError_):
        a2pack.append_dataset(ds, bad, workers=1, progress=lambda done, total: done < 256)
    assert (ds / "steps.npy").read_bytes() == before
    assert sorted(os.listdir(ds)) == ["manifest.json", "metadata.db", "steps.npy"]
    assert a2pack.verify_dataset(ds)["ok"]


def test_the_cli_says_what_an_append_costs_and_offers_copy(base):
    a2pack_cli = str(cli_path())
    tmp, runs, more = base
    ds = tmp / "ds"
    help_text = subprocess.run([a2pack_cli, "dataset", "append", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert "new rows" in help_text and "--copy" in help_text
    out = subprocess.run([a2pack_cli, "dataset", "append", "-d", str(ds), "-i", str(tmp / "more"),
                          "--copy", "--json", "-q"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["steps_copied"] is True
