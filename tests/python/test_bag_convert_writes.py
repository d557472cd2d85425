"""`a2pack bag convert` into a folder of runs as a writer under a hostile
filesystem: a disk that fills up, links planted at the temporary and final
names of the run files, empty records; and the CLI's stdout on a full
device."""

import os
import pathlib
import subprocess

import pytest

from a2pack import bag

import hostile_fs
from cli_util import CLI
from conftest import fixture_path

if not CLI.exists():
    raise RuntimeError(f"no a2pack CLI at {CLI}: build it and set A2PACK_CLI")


def run(*args):
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True)


def make_bag(path, records):
    with bag.Writer(str(path)) as w:
        for r in records:
            w.write(r)
    return path


def records_of(n, size):
    return [bytes([i % 251]) * size for i in range(n)]


def assert_only_whole_runs(folder, records):
    """Every file in `folder` is a run file holding exactly its record: no
    temporaries left, no short or empty file under a final name."""
    names = sorted(os.listdir(folder))
    assert not [n for n in names if ".tmp-" in n], names
    for name in names:
        assert name.startswith("run-") and name.endswith(".a2run2"), name
        i = int(name[4:10])
        assert (folder / name).read_bytes() == records[i], f"{name} is not its whole record"


@pytest.mark.parametrize("n,size", [(3000, 200), (40, 64 << 10)], ids=["small", "large"])
def test_convert_to_a_full_disk_fails_naming_the_reason_and_installs_no_short_file(
        tmp_path, n, size):
    records = records_of(n, size)
    src = make_bag(tmp_path / "in.bag", records)
    with hostile_fs.small_tmpfs(tmp_path / "mnt", "1m") as mnt:
        out = mnt / "out"
        p = run("bag", "convert", src, out)
        assert p.returncode == 3, p.stderr
        assert "No space left on device" in p.stderr and "run-" in p.stderr, p.stderr
        assert "converted" not in p.stderr
        assert_only_whole_runs(out, records)


def test_convert_into_links_planted_at_temporary_names_writes_nothing_outside(tmp_path):
    records = records_of(4, 300)
    src = make_bag(tmp_path / "in.bag", records)
    victim, missing = hostile_fs.make_victims(tmp_path / "outside")
    before = hostile_fs.snapshot(tmp_path / "outside")
    out = tmp_path / "out"
    out.mkdir()
    p, release = hostile_fs.start_paused([CLI, "bag", "convert", src, out])
    for i in range(3):
        target = victim if i % 2 == 0 else missing
        hostile_fs.plant_links_at_temp_names(out, f"run-{i:06d}.a2run2", target, pids=[p.pid])
    # A link at a final name is replaced by the run, its target left alone.
    hostile_fs.plant_link(out / "run-000003.a2run2", victim)
    _, err = release()
    assert p.returncode == 0, err
    hostile_fs.assert_nothing_written_outside(tmp_path / "outside", before)
    for i, r in enumerate(records):
        f = out / f"run-{i:06d}.a2run2"
        assert not f.is_symlink() and f.read_bytes() == r
    # The links it stepped around are still there (not its own to remove);
    # none of its temporaries is.
    left = hostile_fs.links_left(out)
    assert len(left) == 3 * 16
    assert all(os.path.islink(out / n) for n in os.listdir(out) if ".tmp-" in n)


def test_convert_refuses_an_empty_record_naming_it_as_the_pack_path_does(tmp_path):
    run_bytes = fixture_path().read_bytes()
    src = make_bag(tmp_path / "in.bag", [run_bytes, b"", run_bytes])
    folder = run("bag", "convert", src, tmp_path / "out")
    assert folder.returncode == 1, folder.stderr
    assert "record 1" in folder.stderr and "empty" in folder.stderr, folder.stderr
    assert not (tmp_path / "out" / "run-000001.a2run2").exists()
    assert not (tmp_path / "out" / "run-000002.a2run2").exists()
    pack = run("bag", "convert", src, tmp_path / "p.a2pack")
    assert pack.returncode == 1, pack.stderr
    assert "record 1" in pack.stderr and "empty" in pack.stderr, pack.stderr
    assert not (tmp_path / "p.a2pack").exists()
    # Into a bag an empty record is a record like any other.
    assert run("bag", "convert", src, tmp_path / "c.bag").returncode == 0
    assert list(bag.Reader(str(tmp_path / "c.bag"))) == [run_bytes, b"", run_bytes]


@pytest.mark.parametrize("argv", [
    ["bag", "cat", "{bag}"],
    ["bag", "cat", "{bag}", "--hex"],
    ["bag", "cat", "{bag}", "--lengths"],
    ["bag", "info", "{bag}", "--json"],
    ["bag", "convert", "{bag}", "{tmp}/c.bag", "--json"],
], ids=["cat", "cat-hex", "cat-lengths", "info-json", "convert-json"])
def test_stdout_on_a_full_device_is_an_error_naming_it(tmp_path, argv):
    src = make_bag(tmp_path / "in.bag", records_of(3, 100))
    args = [a.format(bag=src, tmp=tmp_path) for a in argv]
    with open("/dev/full", "w") as full:
        p = subprocess.run([str(CLI), *args], stdout=full, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 3, p.stderr
    assert "stdout" in p.stderr and "No space left on device" in p.stderr, p.stderr
