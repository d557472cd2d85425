"""What dataset writers may touch besides the dataset: the folders beside
DSDIR that a build cleans up (only its own leftovers), the folder
`--overwrite` replaces (only an empty one or a dataset), and files in the
dataset reached through links (never written or quoted)."""

import json
import os
import sqlite3
import subprocess

import pytest

import a2pack
from a2pack.dataset_rows import run_rows, write_dataset
from cli_util import cli_path
from test_dataset import make_run, write_runs


def cli(*args, env=None):
    return subprocess.run([cli_path(), *args], capture_output=True, text=True,
                          errors="replace", env=env)


@pytest.fixture
def runs(tmp_path):
    write_runs(tmp_path / "runs", [make_run(s, 5 + s) for s in range(3)])
    return tmp_path / "runs"


def _user_folders(tmp_path, base):
    """A user's folders and files beside DSDIR whose names look like a
    build's leftovers but are not exactly a2pack's (dates, words, a file),
    and one of exactly a2pack's shape that a2pack did not make."""
    made = {
        f"{base}.old-2025-01-15/notes.txt": b"dated backup",
        f"{base}.tmp-30000-notes/todo.md": b"notes",
        f"{base}.old-2024-06-01/checkpoints/model.pt": b"weights",
        f"{base}.tmp-999999999-7/mine.txt": b"not a2pack's",
    }
    for rel, data in made.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (tmp_path / f"{base}.tmp-4000000.txt").write_bytes(b"a plain file")
    (tmp_path / f"{base}.tmp-999999999-8").mkdir()  # empty, of a2pack's shape, unmarked
    return {**made, f"{base}.tmp-4000000.txt": b"a plain file"}


def _survived(tmp_path, made):
    for rel, data in made.items():
        assert (tmp_path / rel).read_bytes() == data, rel
    base = next(iter(made)).split(".")[0]
    assert (tmp_path / f"{base}.tmp-999999999-8").is_dir()


def test_build_keeps_every_sibling_it_did_not_make(tmp_path, runs):
    made = _user_folders(tmp_path, "ds")
    # The CLI, with and without --overwrite.
    r = cli("dataset", "build", "-i", str(runs), "-o", str(tmp_path / "ds"))
    assert r.returncode == 0, r.stderr
    _survived(tmp_path, made)
    # A folder of a2pack's very shape that a2pack did not mark is left alone,
    # and the note says why.
    assert "ds.tmp-999999999-7 alone" in r.stderr and "no a2pack-temp-folder" in r.stderr
    r = cli("dataset", "build", "-i", str(runs), "-o", str(tmp_path / "ds"), "--overwrite",
            "--json")
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout)["notes"]
    assert any("ds.tmp-999999999-8 alone" in n for n in notes), notes
    _survived(tmp_path, made)
    # Python's build, and write_dataset (the rows path).
    res = a2pack.build_dataset(runs, tmp_path / "ds", overwrite=True, workers=1)
    assert any("ds.tmp-999999999-7 alone" in n for n in res["notes"]), res
    _survived(tmp_path, made)
    rows = [run_rows(a2pack.RunV2.load(p)) for p in sorted(runs.iterdir())]
    res = write_dataset(tmp_path / "ds", rows, overwrite=True)
    assert any("ds.tmp-999999999-7 alone" in n for n in res["notes"]), res
    _survived(tmp_path, made)
    assert a2pack.verify_dataset(tmp_path / "ds")["ok"]


def test_build_of_another_name_keeps_its_checkpoints(tmp_path, runs):
    made = _user_folders(tmp_path, "train")
    a2pack.build_dataset(runs, tmp_path / "train", workers=1)
    a2pack.build_dataset(runs, tmp_path / "train", overwrite=True, workers=1)
    _survived(tmp_path, made)


def test_a_killed_build_leaves_a_folder_the_next_build_removes_saying_so(tmp_path, runs):
    env = dict(os.environ, A2PACK_TEST_CRASH_AT="build:steps-written")
    r = cli("dataset", "build", "-i", str(runs), "-o", str(tmp_path / "ds"), "-j", "1", env=env)
    assert r.returncode == 86, r.stderr
    left = [p for p in tmp_path.iterdir() if p.name.startswith("ds.tmp-")]
    assert len(left) == 1 and (left[0] / "a2pack-temp-folder").is_file()
    # A copy of that folder under another name of the same shape is not the
    # folder its marker names: kept.
    twin = tmp_path / "ds.tmp-999999999-3"
    twin.mkdir()
    for f in left[0].iterdir():
        (twin / f.name).write_bytes(f.read_bytes())
    # A leftover a user then put a file into is kept too.
    r = cli("dataset", "build", "-i", str(runs), "-o", str(tmp_path / "other"), "-j", "1", env=env)
    assert r.returncode == 86
    (other_left,) = [p for p in tmp_path.iterdir() if p.name.startswith("other.tmp-")]
    (other_left / "keep.txt").write_bytes(b"mine")

    res = a2pack.build_dataset(runs, tmp_path / "ds", workers=1)
    assert not left[0].exists()
    assert any(f"removed {left[0]}" in n and "did not finish" in n for n in res["notes"]), res
    assert twin.is_dir() and any("ds.tmp-999999999-3 alone" in n for n in res["notes"])
    r = cli("dataset", "build", "-i", str(runs), "-o", str(tmp_path / "other"))
    assert r.returncode == 0, r.stderr
    assert (other_left / "keep.txt").read_bytes() == b"mine"
    assert "keep.txt, which a2pack did not write" in r.stderr
    assert a2pack.verify_dataset(tmp_path / "ds")["ok"]


def test_a_build_killed_after_swapping_leaves_the_old_dataset_to_be_removed(tmp_path, runs):
    a2pack.build_dataset(runs, tmp_path / "ds", workers=1)
    write_runs(tmp_path / "more", [make_run(50, 4)])
    env = dict(os.environ, A2PACK_TEST_CRASH_AT="build:exchanged")
    r = cli("dataset", "build", "-i", str(tmp_path / "more"), "-o", str(tmp_path / "ds"),
            "--overwrite", "-j", "1", env=env)
    assert r.returncode == 86, r.stderr
    (old,) = [p for p in tmp_path.iterdir() if p.name.startswith("ds.tmp-")]
    assert (old / "manifest.json").is_file()  # the previous dataset
    # The new dataset is in place and opens (its marker noted as a leftover).
    ds = a2pack.Dataset(tmp_path / "ds")
    assert len(ds) == 4
    del ds
    res = a2pack.build_dataset(runs, tmp_path / "ds", overwrite=True, workers=1)
    assert not old.exists()
    assert any(f"removed {old}" in n for n in res["notes"]), res
    assert sorted(os.listdir(tmp_path / "ds")) == ["manifest.json", "metadata.db", "steps.npy"]


def test_overwrite_refuses_a_folder_that_is_not_a_dataset(tmp_path, runs):
    web = tmp_path / "webapp"
    (web / "src").mkdir(parents=True)
    (web / "src" / "app.js").write_text("console.log(1)")
    (web / "manifest.json").write_text('{"name": "webapp", "start_url": "/"}')
    r = cli("dataset", "build", "-i", str(runs), "-o", str(web), "--overwrite")
    assert r.returncode != 0
    assert str(web) in r.stderr and "src/" in r.stderr, r.stderr
    assert (web / "src" / "app.js").read_text() == "console.log(1)"
    # Only a manifest that is not a2pack's: refused, saying so.
    os.remove(web / "src" / "app.js")
    os.rmdir(web / "src")
    with pytest.raises(a2pack.InvalidArgumentError, match="not an a2pack dataset manifest"):
        a2pack.build_dataset(runs, web, overwrite=True)
    assert json.loads((web / "manifest.json").read_text())["name"] == "webapp"
    # A dataset with a file of the user's in it: refused, naming the file.
    a2pack.build_dataset(runs, tmp_path / "ds", workers=1)
    (tmp_path / "ds" / "README.txt").write_text("keep me")
    with pytest.raises(a2pack.InvalidArgumentError, match="README.txt"):
        a2pack.build_dataset(runs, tmp_path / "ds", overwrite=True)
    assert (tmp_path / "ds" / "README.txt").read_text() == "keep me"
    # steps.npy and metadata.db that are not a dataset's, without a manifest.
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "steps.npy").write_text("not numpy")
    (fake / "metadata.db").write_text("not sqlite")
    with pytest.raises(a2pack.InvalidArgumentError, match="not an NPY file"):
        a2pack.build_dataset(runs, fake, overwrite=True)
    assert (fake / "steps.npy").read_text() == "not numpy"


def test_overwrite_replaces_an_empty_folder_an_a2pack_dataset_and_an_upstream_one(tmp_path, runs):
    (tmp_path / "empty").mkdir()
    a2pack.build_dataset(runs, tmp_path / "empty", overwrite=True, workers=1)
    assert a2pack.verify_dataset(tmp_path / "empty")["ok"]
    a2pack.build_dataset(runs, tmp_path / "ds", workers=1)
    a2pack.build_dataset(runs, tmp_path / "ds", overwrite=True, workers=1, shard_rows=4)
    a2pack.build_dataset(runs, tmp_path / "ds", overwrite=True, workers=1)  # sharded, replaced
    # Upstream's layout: steps.npy and metadata.db, no manifest.
    os.remove(tmp_path / "ds" / "manifest.json")
    write_runs(tmp_path / "more", [make_run(70, 6)])
    a2pack.build_dataset(tmp_path / "more", tmp_path / "ds", overwrite=True, workers=1)
    assert len(a2pack.Dataset(tmp_path / "ds")) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "empty", "more", "runs"]


def test_append_refuses_a_symlinked_metadata_db_and_leaves_its_target(tmp_path, runs):
    ds = tmp_path / "ds"
    a2pack.build_dataset(runs, ds, workers=1)
    outside = tmp_path / "elsewhere.db"
    os.rename(ds / "metadata.db", outside)
    os.symlink(outside, ds / "metadata.db")
    before, steps = outside.read_bytes(), (ds / "steps.npy").read_bytes()
    write_runs(tmp_path / "more", [make_run(60, 4)])
    for call in (lambda: a2pack.append_dataset(ds, tmp_path / "more", workers=1),
                 lambda: a2pack.verify_dataset(ds, repair=True)):
        with pytest.raises(a2pack.InvalidArgumentError,
                           match=r"ds/metadata.db: is a symbolic link"):
            call()
    r = cli("dataset", "append", "-d", str(ds), "-i", str(tmp_path / "more"))
    assert r.returncode != 0 and "metadata.db: is a symbolic link" in r.stderr
    assert outside.read_bytes() == before
    assert (ds / "steps.npy").read_bytes() == steps
    assert sorted(os.listdir(ds)) == ["manifest.json", "metadata.db", "steps.npy"]
    # Readers still read it (read-only, never writing through the link).
    assert a2pack.Dataset(ds).num_runs == 3


def _make_unwritable(path):
    """Make `path` unwritable in a way that holds for this process: mode bits
    for a user, the immutable attribute for root (mode bits do not stop
    root). Returns an undo function, or None when neither can be done."""
    if os.geteuid() != 0:
        mode = os.stat(path).st_mode
        os.chmod(path, 0o555 if os.path.isdir(path) else 0o444)
        return lambda: os.chmod(path, mode)
    r = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if r.returncode != 0:
        return None
    return lambda: subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("what", ["metadata.db", "folder"])
def test_append_to_an_unwritable_dataset_fails_before_writing_a_row(tmp_path, runs, what):
    ds = tmp_path / "ds"
    a2pack.build_dataset(runs, ds, workers=1)
    write_runs(tmp_path / "more", [make_run(60, 40)])
    target = ds / "metadata.db" if what == "metadata.db" else ds
    files = {p.name: p.read_bytes() for p in ds.iterdir()}
    try:
        undo = _make_unwritable(target)
    except FileNotFoundError:
        undo = None
    if undo is None:
        pytest.skip("cannot make a file unwritable for root here (no chattr +i)")
    try:
        with pytest.raises(a2pack.Error) as e:
            a2pack.append_dataset(ds, tmp_path / "more", workers=1)
        assert str(target) in str(e.value) and "not writable" in str(e.value), e.value
        assert {p.name: p.read_bytes() for p in ds.iterdir()} == files
    finally:
        undo()
    assert a2pack.append_dataset(ds, tmp_path / "more", workers=1)["runs_added"] == 1


def test_a_damaged_journal_is_noted_by_readers_and_removed_by_repair(tmp_path, runs):
    ds = tmp_path / "ds"
    a2pack.build_dataset(runs, ds, workers=1)
    (ds / "append-journal.json").write_text('{"format": "a2pack-append-journal", "pid": ')
    # Readers open the committed dataset, noting the journal.
    assert a2pack.Dataset(ds).num_runs == 3
    rep = a2pack.verify_dataset(ds)
    assert rep["ok"] and any("append-journal.json: not valid JSON" in n and "ignored" in n
                             for n in rep["notes"]), rep
    rep = a2pack.verify_dataset(ds, repair=True)
    assert rep["ok"] and any("removed a damaged append journal" in a for a in rep["actions"]), rep
    assert not (ds / "append-journal.json").exists()


def test_a_damaged_journal_never_drops_rows_unless_asked(tmp_path, runs):
    ds = tmp_path / "ds"
    a2pack.build_dataset(runs, ds, workers=1)
    write_runs(tmp_path / "more", [make_run(60, 4)])
    # An in-place append cut off after its rows: a tail past the header's
    # count, and its journal then damaged.
    env = dict(os.environ, A2PACK_TEST_CRASH_AT="append:steps-synced")
    r = cli("dataset", "append", "-d", str(ds), "-i", str(tmp_path / "more"), "-j", "1", env=env)
    assert r.returncode == 86, r.stderr
    (ds / "append-journal.json").write_bytes(b"\x00garbage")
    size = os.path.getsize(ds / "steps.npy")
    assert a2pack.Dataset(ds).num_runs == 3  # the committed rows; the tail ignored
    rep = a2pack.verify_dataset(ds)
    assert rep["ok"] and any("append-journal.json" in n for n in rep["notes"]), rep
    # Repair and append refuse to guess, changing nothing...
    for call in (lambda: a2pack.verify_dataset(ds, repair=True),
                 lambda: a2pack.append_dataset(ds, tmp_path / "more", workers=1)):
        with pytest.raises(a2pack.CorruptError, match="damaged journal cannot say"):
            call()
        assert os.path.getsize(ds / "steps.npy") == size
        assert (ds / "append-journal.json").exists()
    # ...until asked to drop what lies past the committed state.
    rep = a2pack.verify_dataset(ds, repair=True, discard_unrecorded=True)
    assert rep["ok"], rep
    assert any("removed a damaged append journal" in a for a in rep["actions"])
    assert not (ds / "append-journal.json").exists()
    assert a2pack.append_dataset(ds, tmp_path / "more", workers=1)["total_runs"] == 4


def test_a_manifest_linked_elsewhere_is_not_read_or_quoted(tmp_path, runs):
    ds = tmp_path / "ds"
    a2pack.build_dataset(runs, ds, workers=1)
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$SECRETHASH:19000:0:99999:7:::\n")
    os.remove(ds / "manifest.json")
    os.symlink(secret, ds / "manifest.json")
    for call in (lambda: a2pack.Dataset(ds), lambda: a2pack.verify_dataset(ds, repair=True)):
        with pytest.raises(a2pack.CorruptError, match="manifest.json: is a symbolic link") as e:
            call()
        assert "SECRET" not in str(e.value)
    r = cli("dataset", "stats", "-d", str(ds))
    assert r.returncode != 0 and "SECRET" not in r.stderr + r.stdout
    # Text that is not JSON in the dataset's own manifest: the file and the
    # offset, not the text.
    os.remove(ds / "manifest.json")
    (ds / "manifest.json").write_text('{"format": "a2pack-steps", "rows": "SECRETHASH-long-text')
    with pytest.raises(a2pack.CorruptError, match=r"manifest.json: not valid JSON at byte "
                                                   r"offset \d+") as e:
        a2pack.Dataset(ds)
    assert "SECRET" not in str(e.value)
