"""Damaged dataset files made here: a metadata.db cut by one byte, an index
entry pointing at another run, and a manifest.json with invalid UTF-8. The
Python API and the CLI must raise CorruptError naming the file, never answer a
filter quietly wrong, and never an InternalError."""

import os
import sqlite3
import subprocess

import pytest

import a2pack

from cli_util import cli_path
from test_dataset import make_run, write_runs


def build(tmp_path, n):
    runs = [make_run(i, 3 + i % 5, engine="eng-a" if i % 3 else "eng-b") for i in range(n)]
    write_runs(tmp_path / "in", runs)
    a2pack.build_dataset(tmp_path / "in", tmp_path / "ds", workers=1)
    return tmp_path / "ds"


def cli(*args):
    return subprocess.run([cli_path(), *args], capture_output=True, text=True, errors="replace")


def test_metadata_db_cut_by_one_byte_is_corrupt_everywhere(tmp_path):
    ds = build(tmp_path, 300)
    db = ds / "metadata.db"
    os.truncate(db, db.stat().st_size - 1)
    for kwargs in ({}, {"verify": False}, {"mmap": True}):
        with pytest.raises(a2pack.CorruptError, match="metadata.db: .*cut short"):
            a2pack.Dataset(ds, **kwargs)
    with pytest.raises(a2pack.CorruptError, match="metadata.db: .*cut short"):
        a2pack.verify_dataset(ds)
    write_runs(tmp_path / "more", [make_run(99, 4)])
    with pytest.raises(a2pack.CorruptError, match="metadata.db"):
        a2pack.append_dataset(ds, tmp_path / "more")
    for args in (["stats"], ["verify"], ["verify", "--json"]):
        r = cli("dataset", *args, "--dataset", str(ds))
        assert r.returncode == 1, (args, r.stderr)
        out = r.stdout + r.stderr  # --json reports on stdout
        assert "metadata.db" in out and "cut short" in out and "internal error" not in out, out


def test_index_pointing_at_another_run_is_corrupt(tmp_path):
    ds = build(tmp_path, 40)  # idx_runs_engine fits one leaf page
    db = ds / "metadata.db"
    with sqlite3.connect(db) as c:
        root = c.execute("SELECT rootpage FROM sqlite_master "
                         "WHERE name = 'idx_runs_engine'").fetchone()[0]
    data = bytearray(db.read_bytes())
    page = (root - 1) * 4096
    assert data[page] == 0x0A  # a leaf index page
    data[page + 4095] ^= 1     # the low byte of one entry's rowid
    db.write_bytes(bytes(data))
    with pytest.raises(a2pack.CorruptError, match="metadata.db: index idx_runs_engine"):
        a2pack.Dataset(ds)
    with pytest.raises(a2pack.CorruptError, match="idx_runs_engine"):
        a2pack.verify_dataset(ds)


def test_manifest_with_invalid_utf8_is_corrupt_naming_file_and_offset(tmp_path):
    ds = build(tmp_path, 10)
    path = ds / "manifest.json"
    text = path.read_bytes()
    at = text.index(b'"input": "') + 10
    path.write_bytes(text[:at] + b"\xff" + text[at:])
    want = rf"{path}: not valid JSON at byte offset {at}: .*\\xff"
    with pytest.raises(a2pack.CorruptError, match=want):
        a2pack.Dataset(ds)
    with pytest.raises(a2pack.CorruptError, match=want):
        a2pack.verify_dataset(ds)
    with pytest.raises(a2pack.CorruptError, match=want):
        a2pack.verify_dataset(ds, repair=True)
    write_runs(tmp_path / "more", [make_run(99, 4)])
    with pytest.raises(a2pack.CorruptError, match=want):
        a2pack.append_dataset(ds, tmp_path / "more")
    for args in (["stats"], ["verify"], ["verify", "--json"], ["verify", "--repair"]):
        r = cli("dataset", *args, "--dataset", str(ds))
        assert r.returncode == 1, (args, r.returncode, r.stderr)
        out = r.stdout + r.stderr
        assert "manifest.json" in out and "internal error" not in out, out


@pytest.mark.parametrize("name", ["steps.npy", "metadata.db", "manifest.json"])
def test_a_fifo_in_place_of_a_dataset_file_is_refused_without_blocking(tmp_path, name):
    # Nothing ever writes to the FIFO: an open(2) that waited for a writer
    # would hang, so each call runs in a child with a deadline.
    ds = build(tmp_path, 5)
    os.unlink(ds / name)
    os.mkfifo(ds / name)
    for args in (["stats"], ["verify"]):
        try:
            r = subprocess.run([cli_path(), "dataset", *args, "--dataset", str(ds)],
                               capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"dataset {args[0]} blocked on a FIFO {name}")
        assert r.returncode != 0, r.stdout
        assert name in r.stderr and "FIFO" in r.stderr, r.stderr
