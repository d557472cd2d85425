"""append_runs: runs handed to the library's append from memory or from
ranges of files, written exactly as an append of a folder of the same runs,
and refused clearly (naming the run) when a range or a run is bad."""

import json
import os

import numpy as np
import pytest

import a2pack
from test_dataset import expected_rows, make_run, write_runs


@pytest.fixture
def base(tmp_path):
    runs = [make_run(s, 150 + s) for s in range(12)]
    write_runs(tmp_path / "runs", runs)
    a2pack.build_dataset(tmp_path / "runs", tmp_path / "ds", workers=1)
    more = [make_run(300 + s, 20 + s) for s in range(4)]
    write_runs(tmp_path / "more", more)
    return tmp_path, runs, more


def _copy(src, dst):
    dst.mkdir()
    for n in os.listdir(src):
        (dst / n).write_bytes((src / n).read_bytes())


def _files_but_manifest(folder):
    return {n: (folder / n).read_bytes() for n in os.listdir(folder) if n != "manifest.json"}


def test_runs_from_memory_and_from_file_ranges_write_what_a_folder_append_writes(base):
    tmp, runs, more = base
    for name in ("cli", "mem", "ranges"):
        _copy(tmp / "ds", tmp / name)
    a2pack.append_dataset(tmp / "cli", tmp / "more", workers=1)
    r = a2pack.append_runs(tmp / "mem", more, source="selfplay", source_kind="actors")
    # Ranges: the runs end to end in one file, as a distributed writer stages them.
    blob = tmp / "staged.bin"
    datas = [m.to_bytes("v2") for m in more]
    blob.write_bytes(b"".join(datas))
    at = np.concatenate([[0], np.cumsum([len(d) for d in datas])])
    a2pack.append_runs(tmp / "ranges", [(blob, int(at[i]), len(d)) for i, d in enumerate(datas)])
    assert r["runs_added"] == 4 and r["total_runs"] == 16
    want = _files_but_manifest(tmp / "cli")
    assert _files_but_manifest(tmp / "mem") == want
    assert _files_but_manifest(tmp / "ranges") == want
    np.testing.assert_array_equal(
        np.load(tmp / "mem" / "steps.npy"),
        np.concatenate([expected_rows(runs), expected_rows(more, first_id=len(runs))]))
    src = json.loads((tmp / "mem" / "manifest.json").read_text())["sources"][-1]
    assert (src["input"], src["kind"], src["runs"]) == ("selfplay", "actors", 4)
    src = json.loads((tmp / "ranges" / "manifest.json").read_text())["sources"][-1]
    assert (src["input"], src["kind"]) == ("python", "python")
    for name in ("mem", "ranges"):
        assert a2pack.verify_dataset(tmp / name)["ok"]
        assert sorted(os.listdir(tmp / name)) == ["manifest.json", "metadata.db", "steps.npy"]


def test_bad_runs_and_ranges_are_refused_naming_them_and_nothing_changes(base):
    tmp, runs, more = base
    ds = tmp / "ds"
    before = {n: (ds / n).read_bytes() for n in os.listdir(ds)}
    good = more[0].to_bytes("v2")
    blob = tmp / "one.bin"
    blob.write_bytes(good)
    with pytest.raises(a2pack.CorruptError, match=r"actor-7.*bytes 10\.\..*one\.bin"):
        a2pack.append_runs(ds, [good, (blob, 10, len(good))], labels=["a", "actor-7"])
    with pytest.raises(a2pack.Error, match="game 2"):
        a2pack.append_runs(ds, [good, more[1], good[:40]], labels=["game 0", "game 1", "game 2"])
    with pytest.raises(a2pack.InvalidArgumentError, match="no runs to append"):
        a2pack.append_runs(ds, [])
    with pytest.raises(ValueError, match="2 runs but 1 labels"):
        a2pack.append_runs(ds, [good, good], labels=["x"])
    with pytest.raises(a2pack.InvalidArgumentError, match="repeat|duplicate"):
        a2pack.append_runs(ds, [runs[3]])  # a run the dataset holds
    assert {n: (ds / n).read_bytes() for n in os.listdir(ds)} == before
    # skip_bad: the bad one is named by its label and skipped; the rest land.
    r = a2pack.append_runs(ds, [good, b"not a run", more[1]], labels=["g0", "junk", "g1"],
                           skip_bad=True)
    assert r["runs_added"] == 2 and r["runs_skipped"] == 1
    assert [label for label, _why in r["skipped"]] == ["junk"]
    assert a2pack.verify_dataset(ds)["ok"]
