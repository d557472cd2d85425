"""The HTML report in a real browser (headless Chromium): every plot
rendered with a size, the replay slider changes the board and highlights the
chosen move; a screenshot is kept in $A2PACK_ARTIFACTS (default: the
pytest temporary folder). Run by `make test` through mk/arrow.mk, which
installs Debian's chromium first."""

import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

import a2pack

pytest.importorskip("matplotlib")
from a2pack import report  # noqa: E402

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--hide-scrollbars", "--virtual-time-budget=5000"]


def _browser():
    if BROWSER is None:
        if os.environ.get("A2PACK_REQUIRE_BROWSER"):
            pytest.fail("chromium not found (make test installs it: mk/arrow.mk)")
        pytest.skip("chromium not installed")
    return BROWSER


def _selftest(html_path: pathlib.Path, tmp_path) -> dict:
    profile = tmp_path / "profile"
    r = subprocess.run([_browser(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                        html_path.resolve().as_uri() + "?selftest=1"],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="selftest"[^>]*>(.*?)</pre>', r.stdout, re.S)
    assert m, f"no self-test verdict in the DOM; chromium said: {r.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def test_pack_report_in_chromium(tmp_path):
    a2pack.generate_dir(tmp_path / "runs", 12, seed=21, policy="greedy", max_steps=400)
    a2pack.pack_dir(tmp_path / "runs", tmp_path / "p.a2pack")
    page = tmp_path / "report.html"
    report.write_report(tmp_path / "p.a2pack", page)
    v = _selftest(page, tmp_path)
    names = [p["name"] for p in v["plots"]]
    assert names == ["score", "length", "highest_tile", "moves", "legal_moves", "ev_values",
                     "engines"]
    for p in v["plots"]:
        assert p["svg"] and p["width"] > 200 and p["height"] > 100 and p["paths"] > 20, p
    rp = v["replay"]
    assert rp["tiles"] == 16 and rp["slider"] == 5
    assert rp["before"] != rp["after"], "moving the slider did not change the board"
    assert rp["chosen"] == 1
    # The board after the slider moved is the run's board at step 5.
    data = report.load(tmp_path / "p.a2pack")
    assert rp["after"] == f"{int(data.replays[0].boards[5]):016x}"

    art = pathlib.Path(os.environ.get("A2PACK_ARTIFACTS", tmp_path))
    art.mkdir(parents=True, exist_ok=True)
    shot = art / "report.png"
    subprocess.run([_browser(), *FLAGS, f"--user-data-dir={tmp_path / 'profile2'}",
                    "--window-size=1400,2400", f"--screenshot={shot}", page.resolve().as_uri()],
                   capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20000


def test_log_report_in_chromium(tmp_path):
    log = tmp_path / "log"
    with a2pack.DataLogger(log) as lg:
        s = lg.register_stream({"name": "loss"}, epoch_scale=1, value_scale=1e-3)
        for e in range(50):
            lg.record(s, e, [0, 2], [1.0 / (e + 1), 0.5])
    page = tmp_path / "log.html"
    report.write_report(log, page)
    v = _selftest(page, tmp_path)
    assert [p["name"] for p in v["plots"]] == ["stream_0"]
    assert v["plots"][0]["width"] > 200 and v["replay"] is None
