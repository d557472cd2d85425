"""a2pack's appends and upstream's own `dataset` tool on one folder: the real
binary (built from a copy of upstream, as test_ai_2048_upstream_suite finds
one, or named by $A2PACK_UPSTREAM_DATASET), not a reproduction of it.

- upstream's `stats` and `append` read what a2pack's in-place append wrote;
- an in-place append interrupted mid-rows, then upstream's append, then
  a2pack's: upstream's runs are adopted, a2pack's lost rows are not, and
  the folder holds exactly the committed content plus both appends.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import a2pack
from test_dataset import expected_rows, make_run, write_runs
from test_ai_2048_upstream_suite import REPO, SOURCES, _checkout


@pytest.fixture(scope="module")
def upstream_dataset(tmp_path_factory):
    env = os.environ.get("A2PACK_UPSTREAM_DATASET")
    if env:
        return pathlib.Path(env)
    heads = [(p, c) for label, p, c in SOURCES if label.endswith("HEAD") or not c]
    if not heads or shutil.which("cargo") is None:
        pytest.skip("no copy of upstream ai-2048 and cargo (set A2PACK_UPSTREAM_DATASET)")
    path, commit = heads[0]
    root = _checkout(path, commit, tmp_path_factory.mktemp("up") / "upstream")
    crate = root / "ai-2048"
    if not (crate / "src" / "bin" / "dataset.rs").is_file():
        pytest.skip("this copy of upstream has no dataset tool")
    target = REPO / "build" / "upstream-ai-2048-target"
    subprocess.run(["cargo", "build", "-q", "--bin", "dataset"], cwd=crate, check=True,
                   env=dict(os.environ, CARGO_TARGET_DIR=str(target)))
    return target / "debug" / "dataset"


def up(tool, *args):
    p = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def up_stats(tool, ds):
    out = up(tool, "stats", "--dataset", ds)
    return {k: int(v) for k, v in re.findall(r"^(steps|runs): (\d+)$", out, re.M)}


def batch(seed, n):
    return [make_run(seed + i, 3 + (seed + i) % 7) for i in range(n)]


def test_upstream_reads_and_appends_to_what_an_in_place_append_wrote(upstream_dataset, tmp_path):
    a, b, c = batch(0, 3), batch(10, 2), batch(20, 2)
    for name, runs in (("a", a), ("b", b), ("c", c)):
        write_runs(tmp_path / name, runs)
    ds = tmp_path / "ds"
    a2pack.build_dataset(tmp_path / "a", ds, workers=1)
    assert a2pack.append_dataset(ds, tmp_path / "b", workers=1)["steps_copied"] is False
    n_ab = sum(map(len, a + b))
    assert up_stats(upstream_dataset, ds) == {"steps": n_ab, "runs": 5}
    up(upstream_dataset, "append", "--dataset", ds, "--input", tmp_path / "c")
    # a's runs a second time, knowingly; upstream's runs get their digests first.
    with pytest.warns(UserWarning, match="adopted 2 runs"):
        r = a2pack.append_dataset(ds, tmp_path / "a", workers=1, allow_duplicates=True)
    assert r["digests_recorded"] == 2 and r["runs_duplicated"] == 3
    want = np.concatenate([expected_rows(a + b), expected_rows(c, 0),  # upstream: run-local ids
                           expected_rows(a, 7)])
    np.testing.assert_array_equal(a2pack.Dataset(ds).steps, want)
    np.testing.assert_array_equal(np.load(ds / "steps.npy"), want)
    assert up_stats(upstream_dataset, ds) == {"steps": len(want), "runs": 10}
    assert a2pack.verify_dataset(ds)["ok"]


def test_an_interrupted_in_place_append_then_upstreams_then_a2packs(upstream_dataset, tmp_path):
    a, lost, c, d = batch(0, 3), batch(30, 300), batch(20, 2), batch(40, 2)
    for name, runs in (("a", a), ("lost", lost), ("c", c), ("d", d)):
        write_runs(tmp_path / name, runs)
    ds = tmp_path / "ds"
    a2pack.build_dataset(tmp_path / "a", ds, workers=1)
    size = (ds / "steps.npy").stat().st_size
    # Killed after its first round of rows: a tail past the header's count.
    p = subprocess.run([sys.executable, "-c",
                        "import sys, a2pack; a2pack.append_dataset(sys.argv[1], sys.argv[2], workers=1)",
                        str(ds), str(tmp_path / "lost")],
                       env=dict(os.environ, A2PACK_TEST_CRASH_AT="append:rows-partial"))
    assert p.returncode == 86
    assert (ds / "steps.npy").stat().st_size > size
    n_a = sum(map(len, a))
    assert up_stats(upstream_dataset, ds) == {"steps": n_a, "runs": 3}  # reads the header's rows
    up(upstream_dataset, "append", "--dataset", ds, "--input", tmp_path / "c")
    with pytest.warns(UserWarning, match="adopted 2 runs"):
        a2pack.append_dataset(ds, tmp_path / "d", workers=1)
    want = np.concatenate([expected_rows(a), expected_rows(c, 0), expected_rows(d, 5)])
    np.testing.assert_array_equal(a2pack.Dataset(ds).steps, want)
    assert up_stats(upstream_dataset, ds) == {"steps": len(want), "runs": 7}
    assert a2pack.verify_dataset(ds)["ok"]
    assert sorted(os.listdir(ds)) == ["manifest.json", "metadata.db", "steps.npy"]
