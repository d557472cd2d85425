"""The README's Python examples run as written.

Each example follows a `<!-- readme-example: NAME -->` marker; the test
prepares what the example assumes (a dataset in ds/) in a fresh folder and
runs the block there unchanged.
"""

import os
import pathlib
import re
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("A2PACK_CLI", str(REPO / "build" / "a2pack"))


def readme_example(name: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- readme-example: " + re.escape(name) + r" -->\s*```python\n(.*?)```", text, re.S)
    assert m, f"README has no example {name!r}"
    return m.group(1)


def test_records_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_example("records"), "README:records", "exec"), {})
    assert capsys.readouterr().out.strip() == "1000 b'record 0' b'record 999'"


def run_training_example(name, tmp_path, monkeypatch, runs=6) -> dict:
    """Make the dataset the example reads (ds/, from `runs` games), run the
    example there unchanged and return its variables."""
    subprocess.run([CLI, "gen", "--runs", str(runs), "--output", str(tmp_path / "runs"), "--seed",
                    "3", "--policy", "greedy", "-q"], check=True)
    subprocess.run([CLI, "dataset", "build", "-i", str(tmp_path / "runs"), "-o",
                    str(tmp_path / "ds"), "-q"], check=True)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(readme_example(name), f"README:{name}", "exec"), scope)
    return scope


def test_training_example(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    scope = run_training_example("training", tmp_path, monkeypatch)
    x, y, legal = scope["x"], scope["y"], scope["legal"]
    assert x.shape[1] == 16 and x.dtype.is_floating_point
    assert y.shape[0] == x.shape[0] == legal.shape[0] and legal.shape[1] == 4
    assert y.dtype == torch.int64 and legal.dtype == torch.bool
    assert scope["state"]["epoch"] == 2  # both epochs served


def test_training_ddp_example(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    scope = run_training_example("training-ddp", tmp_path, monkeypatch, runs=20)
    assert scope["x"].shape[1] == 16 and scope["x"].shape[0] <= 1024


def test_training_jax_example(tmp_path, monkeypatch):
    pytest.importorskip("jax")
    scope = run_training_example("training-jax", tmp_path, monkeypatch)
    x, y = scope["x"], scope["y"]
    assert x.shape[1] == 16 and str(x.dtype) == "uint8" and str(y.dtype) == "int32"
