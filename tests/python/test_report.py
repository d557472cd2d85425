"""a2pack.report: the HTML report of packs, datasets and logger folders, and
the same plots as matplotlib figures (the browser check is tests/report/)."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import a2pack

pytest.importorskip("matplotlib")
from a2pack import report  # noqa: E402


@pytest.fixture(scope="module")
def pack_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("rp")
    a2pack.generate_dir(d / "runs", 10, seed=11, policy="greedy", max_steps=80)
    a2pack.pack_dir(d / "runs", d / "p.a2pack")
    return d / "p.a2pack"


def test_pack_report_is_self_contained(pack_path, tmp_path):
    out = tmp_path / "r.html"
    report.write_report(pack_path, out)
    doc = out.read_text()
    names = re.findall(r'<figure class="plot" data-plot="([a-z_]+)"><svg', doc)
    assert names == ["score", "length", "highest_tile", "moves", "legal_moves", "ev_values",
                     "engines"]
    # Nothing to fetch: no external scripts, styles, images or fonts.
    assert not re.search(r'(src|href)="(https?:)?//', doc)
    assert "<script src" not in doc and "@import" not in doc
    # The replay holds the default runs (best, median, worst) with exact boards.
    data = report.load(pack_path)
    best = int(np.argmax(data.scores))
    b = a2pack.PackReader(pack_path).decode_batch_columns([best])
    assert f'"{int(b.boards[3]):016x}"' in doc
    assert f"entry {best} (score {int(b.max_score[0])}" in doc


def test_figures_for_notebooks_and_values(pack_path):
    data = report.load(pack_path, replay_runs=[2])
    pack = a2pack.PackReader(pack_path)
    b = pack.decode_batch_columns(range(len(pack)))
    assert np.array_equal(data.scores, b.max_score)
    assert np.array_equal(data.moves, b.moves)
    assert len(data.replays) == 1 and data.replays[0].title.startswith("entry 2 ")
    figs = report.figures(data)
    import matplotlib.figure
    assert all(isinstance(f, matplotlib.figure.Figure) for f in figs.values())
    # The moves plot counts the moves.
    bars = [p.get_height() for p in figs["moves"].axes[0].patches]
    assert bars == np.bincount(b.moves, minlength=4).tolist()
    assert "<section" in report.replay(data, run=1)._repr_html_()


def test_dataset_and_log_reports(pack_path, tmp_path):
    ds = tmp_path / "ds"
    a2pack.build_dataset(pack_path, ds)
    out = tmp_path / "ds.html"
    report.write_report(ds, out, replay_runs=[4])
    doc = out.read_text()
    assert "Dataset: ds" in doc and "run 4 (score" in doc
    with pytest.raises(IndexError, match="999"):
        report.write_report(ds, tmp_path / "bad.html", replay_runs=[999])
    assert not (tmp_path / "bad.html").exists()
    log = tmp_path / "log"
    with a2pack.DataLogger(log) as lg:
        a = lg.register_stream({"name": "loss"}, epoch_scale=1, value_scale=1e-3)
        c = lg.register_stream({"name": "acc"}, epoch_scale=1, value_scale=1e-3)
        for e in range(30):
            lg.record(a, e, [0, 1], [1.0 / (e + 1), 2.0 / (e + 1)])
            lg.record(c, e, [0], [e / 30])
    report.write_report(log, tmp_path / "log.html")
    doc = (tmp_path / "log.html").read_text()
    assert re.findall(r'data-plot="([a-z_0-9]+)"', doc) == ["stream_0", "stream_1"]
    assert "name=loss" in doc or "loss" in doc
    with pytest.raises(ValueError, match="neither"):
        report.load(tmp_path)


def test_cli_report(pack_path, tmp_path):
    import pathlib
    cli = pathlib.Path(os.environ.get("A2PACK_CLI",
                                      pathlib.Path(a2pack.library_path).parent / "a2pack"))
    if not (cli.is_file() and os.access(cli, os.X_OK)):
        pytest.skip("a2pack CLI not found beside the library (set A2PACK_CLI)")
    env = dict(os.environ, A2PACK_LIBRARY=a2pack.library_path)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(a2pack.__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])
    out = tmp_path / "cli.html"
    r = subprocess.run([str(cli), "report", str(pack_path), "-o", str(out), "--replay", "0,1",
                        "--python", sys.executable], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 10000 and "entry 1 (score" in out.read_text()
    r = subprocess.run([str(cli), "report", str(tmp_path / "nope"), "-o", str(out),
                        "--python", sys.executable], env=env, capture_output=True, text=True)
    assert r.returncode == 3 and "nope" in r.stderr  # a missing input, as in every command
