"""Upstream's own Python suite (py-ai-2048/tests of the ai-2048 tool) run
against a2pack's `ai_2048`, when a copy of upstream is at hand; skipped
otherwise. The suite is never part of this repository.

Where the copy comes from (docs/ai_2048.md, "Upstream's suite"):
- $A2PACK_UPSTREAM_AI2048: entries separated by os.pathsep, each a checkout
  of upstream (a folder holding py-ai-2048/tests) or a git directory of it
  with "@COMMIT" (default HEAD);
- else a fetched mirror, .mirror/EndlessReform+2048_bench/repo in a folder
  above this repository, at 8c4fc7d (the last commit with packfiles) and
  HEAD.

Upstream's tests that build packs shell out to `cargo run` in the checkout
(upstream's own packer); without cargo they are left out. Its dataset tests
are left out too: upstream's own dataset tools panic on the runs those tests
write (runs without branch values), so they fail against upstream's module
as well, before `ai_2048` is involved.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import List, Tuple

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MIRROR = pathlib.Path(".mirror") / "EndlessReform+2048_bench" / "repo"
# Fail on upstream's module too (its own CLI panics); see the docstring.
UPSTREAM_BROKEN = ["test_dataset.py"]
NEEDS_CARGO = ["test_pack_reader.py", "test_step_batches.py"]


def _sources() -> List[Tuple[str, pathlib.Path, str]]:
    """(label, path, commit or '') for each copy of upstream found."""
    env = os.environ.get("A2PACK_UPSTREAM_AI2048")
    found = []
    if env:
        for entry in filter(None, env.split(os.pathsep)):
            path, _, commit = entry.partition("@")
            p = pathlib.Path(path)
            if (p / "py-ai-2048" / "tests").is_dir():
                found.append((p.name, p, ""))
            else:
                found.append((f"{p.name}@{commit or 'HEAD'}", p, commit or "HEAD"))
        return found
    for parent in REPO.parents:
        git = parent / MIRROR
        if (git / "HEAD").is_file():
            return [("8c4fc7d", git, "8c4fc7d"), ("HEAD", git, "HEAD")]
    return []


SOURCES = _sources()


def _checkout(path: pathlib.Path, commit: str, into: pathlib.Path) -> pathlib.Path:
    if not commit:
        return path
    archive = subprocess.run(["git", "--git-dir", str(path), "archive", commit],
                             capture_output=True, check=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


@pytest.mark.skipif(not SOURCES, reason="no copy of upstream ai-2048 (set A2PACK_UPSTREAM_AI2048)")
@pytest.mark.parametrize("label,path,commit", SOURCES, ids=[s[0] for s in SOURCES])
def test_upstream_suite_passes_on_a2pack(label, path, commit, fixture_file):
    import ai_2048  # noqa: PLC0415 - the copy under test: this checkout's or the installed one

    with tempfile.TemporaryDirectory() as tmp:
        root = _checkout(path, commit, pathlib.Path(tmp) / "upstream")
        tests = root / "py-ai-2048" / "tests"
        if not tests.is_dir():
            pytest.skip(f"{label}: no py-ai-2048/tests")
        leave_out = list(UPSTREAM_BROKEN)
        if shutil.which("cargo") is None:
            leave_out += NEEDS_CARGO
        env = dict(os.environ)
        site = str(pathlib.Path(ai_2048.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [site, env.get("PYTHONPATH")]))
        # Upstream's packer, built once and kept between runs.
        env.setdefault("CARGO_TARGET_DIR", str(REPO / "build" / "upstream-ai-2048-target"))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)]
        cmd += [f"--ignore={tests / name}" for name in leave_out]
        # The example run upstream's tests read lives in its checkout; a2pack
        # reads it in place.
        assert (root / "examples" / "example.a2run2").is_file() or fixture_file.is_file()
        p = subprocess.run(cmd, cwd=tests, env=env, capture_output=True, text=True)
        where = subprocess.run([sys.executable, "-c", "import ai_2048; print(ai_2048.__file__)"],
                               env=env, capture_output=True, text=True).stdout.strip()
        assert pathlib.Path(where).resolve() == pathlib.Path(ai_2048.__file__).resolve()
        assert p.returncode == 0, f"{label}: upstream's suite failed on a2pack\n{p.stdout[-6000:]}"
        assert " passed" in p.stdout and " failed" not in p.stdout, p.stdout[-2000:]
