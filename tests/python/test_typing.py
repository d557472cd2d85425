"""The package type-checks: `mypy --strict` over bindings/python (the
configuration is [tool.mypy] in the repository's pyproject.toml) reports
no error; and its API reference builds with pdoc without a warning (an
annotation pdoc cannot resolve, a broken stub). mypy and pdoc come with the
package's test extra."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_mypy_strict_is_clean():
    if importlib.util.find_spec("mypy") is None:
        reason = "mypy is not installed (pip install 'a2pack[test]' brings it)"
        print(f"test_typing: skipped: {reason}")
        pytest.skip(reason)
    # The checked files, strictness and per-module settings all come from
    # pyproject.toml, so this is exactly `python -m mypy` at the repo root.
    # mypy never loads the library, so a sanitizer run's LD_PRELOAD is left out.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mypy found problems:\n{report}"
    assert "Success: no issues found" in report, report


def test_pdoc_reference_builds_without_warnings(tmp_path):
    if importlib.util.find_spec("pdoc") is None:
        reason = "pdoc is not installed (pip install 'a2pack[test]' brings it)"
        print(f"test_typing: skipped: {reason}")
        pytest.skip(reason)
    # The script `make docs` runs: exit 1 and one line per warning.
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "build_python_docs.py"),
                           str(tmp_path / "python")], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"pdoc warned:\n{report}"
    assert (tmp_path / "python" / "a2pack.html").is_file(), report
