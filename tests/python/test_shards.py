"""Sharded datasets from Python: the layout (each shard a plain numpy file,
together the single-file dataset's rows), appends that add shards, Beam's
sharded build byte for byte the CLI's, and ShardStream's epochs, ranks,
checkpoints and errors."""
import filecmp
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import a2pack
from beam_ddp_helpers import write_run_folder
from cli_util import cli_of_loaded_library


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("shards")
    write_run_folder(base / "runs", 40)
    write_run_folder(base / "more", 12, first_seed=1000)
    a2pack.build_dataset(base / "runs", base / "one")
    a2pack.build_dataset(base / "runs", base / "sh", shard_rows=300)
    return base


def shard_files(d: pathlib.Path):
    m = json.loads((d / "manifest.json").read_text())
    return m, [d / s["file"] for s in m["shards"]]


def test_each_shard_is_a_numpy_file_and_together_they_are_the_dataset(folders):
    m, files = shard_files(folders / "sh")
    assert m["layout"] == "sharded" and m["format_version"] == 2 and len(files) > 3
    parts = [np.load(f) for f in files]
    whole = np.load(folders / "one" / "steps.npy")
    assert np.array_equal(np.concatenate(parts), whole)
    for p, s in zip(parts, m["shards"]):
        assert len(p) == s["rows"] <= 300 or s["runs"] == 1
        assert len(np.unique(p["run_id"])) == s["runs"]
    # The Dataset reads it as one array; selections and gathers work alike.
    a, b = a2pack.Dataset(folders / "sh"), a2pack.Dataset(folders / "one")
    assert len(a) == len(b) and a.num_runs == b.num_runs
    assert np.array_equal(a.filter_by_score(lo=0), b.filter_by_score(lo=0))
    with pytest.raises(a2pack.errors.UnsupportedError, match="sharded"):
        a2pack.Dataset(folders / "sh", mmap=True)


def test_the_cli_writes_the_same_shards(folders, tmp_path):
    cli = cli_of_loaded_library()
    subprocess.run([str(cli), "dataset", "build", "--input", str(folders / "runs"),
                    "--out", str(tmp_path / "c"), "--shard-rows", "300"], check=True,
                   capture_output=True)
    _, mine = shard_files(folders / "sh")
    _, theirs = shard_files(tmp_path / "c")
    assert [f.name for f in mine] == [f.name for f in theirs]
    for x, y in zip(mine, theirs):
        assert filecmp.cmp(x, y, shallow=False)
    help_text = subprocess.run([str(cli), "dataset", "append", "--help"], check=True,
                               capture_output=True, text=True).stdout
    assert "--shard-rows" in help_text and "new shards only" in help_text


def test_append_adds_shards_and_keeps_the_old_ones(folders, tmp_path):
    import shutil
    shutil.copytree(folders / "sh", tmp_path / "sh")
    shutil.copytree(folders / "one", tmp_path / "one")
    _, before = shard_files(tmp_path / "sh")
    stamp = {f.name: (f.stat().st_ino, f.read_bytes()) for f in before}
    r = a2pack.append_dataset(tmp_path / "sh", folders / "more")
    a2pack.append_dataset(tmp_path / "one", folders / "more")
    assert r["runs_added"] == 12 and not r["steps_copied"]
    m, after = shard_files(tmp_path / "sh")
    assert len(after) > len(before)
    for f in before:
        assert (f.stat().st_ino, f.read_bytes()) == stamp[f.name]
    assert np.array_equal(np.concatenate([np.load(f) for f in after]),
                          np.load(tmp_path / "one" / "steps.npy"))
    assert a2pack.verify_dataset(tmp_path / "sh")["ok"]
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="shard_rows"):
        a2pack.append_dataset(tmp_path / "one", folders / "more", shard_rows=100)


def test_beam_builds_the_cli_shards(folders, tmp_path, monkeypatch):
    beam = pytest.importorskip("apache_beam")
    from a2pack import beam as a2beam
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    cli = cli_of_loaded_library()
    subprocess.run([str(cli), "dataset", "build", "--input", str(folders / "runs"),
                    "--out", str(tmp_path / "cli"), "--shard-rows", "300"], check=True,
                   capture_output=True)
    with beam.Pipeline() as p:
        _ = (p | a2beam.ReadRunFiles(folders / "runs")
             | a2beam.BuildDataset(tmp_path / "beam", source_input=str(folders / "runs"),
                                   source_kind="dir", shard_rows=300))
    assert sorted(os.listdir(tmp_path / "beam")) == sorted(os.listdir(tmp_path / "cli"))
    for f in os.listdir(tmp_path / "cli"):
        assert filecmp.cmp(tmp_path / "beam" / f, tmp_path / "cli" / f, shallow=False), f


def test_an_epoch_streams_every_row_once_within_the_budget(folders):
    whole = np.load(folders / "one" / "steps.npy")
    _, files = shard_files(folders / "sh")
    biggest = max(f.stat().st_size for f in files)
    with a2pack.ShardStream(folders / "sh", batch_size=128, budget_bytes=4 * biggest, seed=7,
                            columns=("indices", "exponents", "moves", "legal", "ev_values",
                                     "run_ids", "step_indices", "boards")) as s:
        info = s.info()
        assert info["window_shards"] == 2 and info["batches"] == len(s) > 0
        seen = []
        for b in s:
            i = b["indices"]
            assert np.array_equal(b["run_ids"], whole["run_id"][i])
            assert np.array_equal(b["step_indices"], whole["step_index"][i])
            assert np.array_equal(b["boards"], whole["board"][i])
            assert np.array_equal(b["moves"], whole["move"][i])
            assert np.array_equal(b["ev_values"], whole["ev_values"][i])
            assert b["legal"].dtype == np.bool_ and b["exponents"].shape == (len(i), 16)
            assert s.stats()["resident_bytes"] <= 4 * biggest
            seen.append(i)
        allrows = np.concatenate(seen)
        assert np.array_equal(np.sort(allrows), np.arange(len(whole)))
        assert s.epoch == 1
        st = s.stats()
        assert st["batches"] == info["batches"] and st["evictions"] > 0
        assert st["bytes_read"] >= whole.nbytes


def test_ranks_share_nothing_and_take_the_same_number_of_batches(folders):
    got = []
    for rank in range(3):
        s = a2pack.ShardStream(folders / "sh", batch_size=64, budget_bytes=1 << 22, seed=1,
                               rank=rank, world=3, columns=("indices",))
        got.append([b["indices"] for b in s])
    assert len({len(g) for g in got}) == 1
    flat = [np.concatenate(g) for g in got]
    assert all(len(np.intersect1d(flat[a], flat[b])) == 0
               for a in range(3) for b in range(a + 1, 3))


def test_a_state_resumes_exactly_even_after_an_append(folders, tmp_path):
    import shutil
    shutil.copytree(folders / "sh", tmp_path / "sh")
    kw = dict(batch_size=100, budget_bytes=1 << 22, seed=3, columns=("indices",))
    s = a2pack.ShardStream(tmp_path / "sh", **kw)
    for _ in range(4):
        s.next_batch()
    state = s.state_dict()
    assert state["next_batch"] == 4 and state["epoch"] == 0
    rest = [b["indices"] for b in s]
    # New play arrives; a restarted job finishes the epoch it was in as it
    # would have, and the new shards join at the next one.
    a2pack.append_dataset(tmp_path / "sh", folders / "more")
    r = a2pack.ShardStream(tmp_path / "sh", **kw)
    r.load_state_dict(state)
    again = [b["indices"] for b in r]
    assert len(again) == len(rest) and all(np.array_equal(x, y) for x, y in zip(again, rest))
    assert r.info()["rows"] > s.info()["rows"]
    assert sum(len(b["indices"]) for b in r) == r.info()["rows"]  # epoch 1: every row
    # What cannot resume exactly is refused, naming it.
    other = a2pack.ShardStream(tmp_path / "sh", **dict(kw, seed=4))
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="seed"):
        other.load_state_dict(state)
    two = a2pack.ShardStream(tmp_path / "sh", **dict(kw, world=2))
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="rank"):
        two.load_state_dict(state)
    bad = bytearray(state["a2pack_shard_stream"])
    bad[30] ^= 1
    with pytest.raises(a2pack.errors.CorruptError):
        r.load_state_dict(bytes(bad))


def test_bad_arguments_are_clear_errors(folders):
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="budget"):
        a2pack.ShardStream(folders / "sh", budget_bytes=1000)
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="ranks"):
        a2pack.ShardStream(folders / "sh", world=1000, rank=0)
    with pytest.raises(ValueError, match="unknown column"):
        a2pack.ShardStream(folders / "sh", columns=("nope",))
    with pytest.raises(a2pack.errors.NotFoundError):
        a2pack.ShardStream(folders / "missing")
    s = a2pack.ShardStream(folders / "one", budget_bytes=1 << 24)  # a single file is one shard
    assert s.info()["shards"] == 1
    s.close()
    with pytest.raises(ValueError, match="closed"):
        s.next_batch()


def test_a_forked_child_is_refused_clearly_and_frees_nothing_of_the_parent(folders):
    import gc
    s = a2pack.ShardStream(folders / "sh", batch_size=64, budget_bytes=1 << 22,
                           columns=("indices",))
    first = s.next_batch()
    pid = os.fork()
    if pid == 0:  # the child: the feed's threads are the parent's
        code = 3
        try:
            s.next_batch()
        except a2pack.errors.ClosedError as e:
            code = 0 if "forked" in str(e) else 4
        except BaseException:
            code = 5
        del s
        gc.collect()  # the stream's destructor must neither join nor hang
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    second = s.next_batch()
    assert second is not None and not np.array_equal(first["indices"], second["indices"])


@pytest.mark.parametrize("shard_rows", [0, 300])
def test_beam_appends_what_the_cli_appends(folders, tmp_path, shard_rows):
    """AppendToDataset, on Beam's DirectRunner, appends the runs the CLI's
    append would, in the same order: the same rows (steps.npy or new
    shards) and metadata.db, byte for byte."""
    beam = pytest.importorskip("apache_beam")
    import shutil
    from a2pack import beam as a2beam
    base = folders / ("sh" if shard_rows else "one")
    shutil.copytree(base, tmp_path / "cli")
    shutil.copytree(base, tmp_path / "beam")
    cli = cli_of_loaded_library()
    subprocess.run([str(cli), "dataset", "append", "--dataset", str(tmp_path / "cli"),
                    "--input", str(folders / "more")], check=True, capture_output=True)
    (folders / "bad").mkdir(exist_ok=True)
    (folders / "bad" / "zz.a2run2").write_bytes(b"A2T2 not a run")
    with beam.Pipeline() as p:
        out = ((p | "a" >> a2beam.ReadRunFiles(folders / "more"),
                p | "b" >> a2beam.ReadRunFiles(folders / "bad"))
               | a2beam.AppendToDataset(tmp_path / "beam"))
        from apache_beam.testing import util
        util.assert_that(out | beam.Map(lambda r: (r["runs_added"], len(r["bad_runs"]))),
                         util.equal_to([(12, 1)]))
    names = sorted(os.listdir(tmp_path / "cli"))
    assert sorted(os.listdir(tmp_path / "beam")) == names
    for f in names:
        if f != "manifest.json":
            assert filecmp.cmp(tmp_path / "beam" / f, tmp_path / "cli" / f, shallow=False), f
    assert a2pack.verify_dataset(tmp_path / "beam")["ok"]
    assert not [x for x in os.listdir(tmp_path) if "beam-append" in x]
