"""The package used straight from a clone (PYTHONPATH=bindings/python, after
`make build`): the generated cffi module is made from the clone's header on
first import, and the clone's build/liba2pack.so is found without
A2PACK_LIBRARY."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_import_from_a_clone_generates_ffi_and_finds_the_build(tmp_path):
    lib = ROOT / "build" / "liba2pack.so"
    if not lib.exists():
        pytest.skip("no build/liba2pack.so in this checkout")
    # A copy of the clone's layout without a generated _ffi.py.
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "bindings" / "python" / "a2pack", clone / "bindings/python/a2pack",
                    ignore=shutil.ignore_patterns("_ffi.py", "*.so*", "__pycache__", "_bin"))
    shutil.copy(ROOT / "bindings" / "python" / "gen_ffi.py", clone / "bindings/python")
    shutil.copy(ROOT / "bindings" / "header_model.py", clone / "bindings")
    shutil.copytree(ROOT / "include", clone / "include")
    (clone / "build").mkdir()
    os.symlink(lib, clone / "build" / "liba2pack.so")
    env = {k: v for k, v in os.environ.items() if k not in ("A2PACK_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(clone / "bindings" / "python")
    r = subprocess.run([sys.executable, "-c", "import a2pack; print(a2pack.library_path)"],
                       env=env, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(clone / "build" / "liba2pack.so")
    assert (clone / "bindings/python/a2pack/_ffi.py").exists()
    # Without a build, the error says how to install.
    (clone / "build" / "liba2pack.so").unlink()
    r = subprocess.run([sys.executable, "-c", "import a2pack"], env=env, capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode != 0 and "pip install" in r.stderr and "make build" in r.stderr
