"""Upstream's names on the packfile surface: the flags of upstream's `a2pack` tool as aliases, `--compress lz4`
and `--compress zstd` (upstream names lz4 and writes neither), `import ai_2048` for upstream's Python
surface, packs with compressed entries marked (header version 2) so that upstream's
reader refuses them at open, and exports that fsync only with --durable."""

import os
import pathlib
import shutil
import struct
import subprocess

import numpy as np
import pytest

import a2pack
from a2pack.run import Meta


from cli_util import CLI


def run(*args, ok=True):
    p = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture
def runs(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    for i in range(6):
        rng = np.random.default_rng(i)
        n = 300 + i
        r = a2pack.RunV2.from_arrays(
            Meta(n, 1_700_000_000, 1.5, 10 * i, 2048, None),
            rng.integers(0, 2**60, n, dtype=np.uint64), rng.integers(0, 4, n, dtype=np.uint8),
            rng.random((n, 4), dtype=np.float32), np.full(n, 0xF, np.uint8), None, final_board=i)
        (d / f"r{i}.a2run2").write_bytes(r.to_bytes())
    return d


def header_version(path) -> int:
    return struct.unpack_from("<I", pathlib.Path(path).read_bytes(), 8)[0]


def test_upstream_flag_aliases(runs, tmp_path):
    a, b = tmp_path / "a.a2pack", tmp_path / "b.a2pack"
    run("pack", "--input", runs, "--output", a)
    run("pack", "--input", runs, "--output", b, "--entry-crc", "--no-progress", "--align", 4096)
    assert a.read_bytes() == b.read_bytes()
    c = tmp_path / "c.a2pack"
    run("pack", "--input", runs, "--output", c, "--entry-crc=false")
    d = tmp_path / "d.a2pack"
    run("pack", "--input", runs, "--output", d, "--no-crc")
    assert c.read_bytes() == d.read_bytes() != a.read_bytes()
    run("validate", "--packfile", a, "--no-progress")
    j1, j2, j3 = (tmp_path / f"{k}.jsonl" for k in "123")
    run("to-jsonl", "--packfile", a, "--output", j1, "--steps")
    run("to-jsonl", "--packfile", a, "--output", j2, "--by-step", "--parallel", "--no-progress")
    run("to-jsonl", "--packfile", a, "--output", j3, "--by-step", "--parallel=false")
    assert j1.read_bytes() == j2.read_bytes() == j3.read_bytes()
    assert j1.read_text().count("\n") == sum(300 + i for i in range(6))


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_compressed_packs_are_version_2_stored_packs_version_1(runs, tmp_path, codec, fixture_file):
    # Upstream's example run among them: lz4 does not shrink the random runs.
    shutil.copy(fixture_file, runs / "zz-fixture.a2run2")
    s, z = tmp_path / "s.a2pack", tmp_path / f"{codec}.a2pack"
    run("pack", "--input", runs, "--output", s)
    run("pack", "--input", runs, "--output", z, "--compress", codec)
    assert header_version(s) == 1 and header_version(z) == 2
    rs, rz = a2pack.PackReader(s), a2pack.PackReader(z)
    assert [rz.read(i) for i in range(len(rz))] == [rs.read(i) for i in range(len(rs))]
    assert rz.entry(len(rz) - 1).compression == codec
    assert {rz.entry(i).compression for i in range(len(rz))} <= {codec, "none"}
    run("validate", "--packfile", z, "--full")


def test_ai_2048_import_path(runs, tmp_path):
    import ai_2048 as a2  # noqa: PLC0415 - the import is what is tested

    pack = tmp_path / "dataset.a2pack"
    a2pack.pack_dir(runs, pack)
    r = a2.PackReader.open(pack)
    assert len(r) == 6 and r.kind(0) == "v2"
    run0 = r.decode(0)
    assert isinstance(run0, a2.RunV2) and run0.meta.steps == 300
    assert [x.meta.steps for x in r.decode_batch([5, 1])] == [305, 301]
    assert sum(1 for _ in r.iter()) == sum(1 for _ in r) == 6
    assert [x.meta.steps for x in r.iter_indices([2, 0])] == [302, 300]
    assert [len(b) for b in r.iter_batches(batch_size=4)] == [4, 2]
    s1 = [x.meta.steps for b in r.iter_batches(batch_size=3, shuffle=True, seed=123) for x in b]
    s2 = [x.meta.steps for b in r.iter_batches(batch_size=3, shuffle=True, seed=123) for x in b]
    assert s1 == s2 and sorted(s1) == [300 + i for i in range(6)]
    out = tmp_path / "runs.jsonl"
    r.to_jsonl(out, parallel=True, workers=None)
    assert out.read_text().count("\n") == 6
    s = r.stats
    assert isinstance(s, a2.PackStats) and (s.count, s.max_len) == (6, 305)
    assert isinstance(r.a2pack, a2pack.PackReader)  # a2pack's reader underneath


def _fsyncs(cmd):
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync,sync_file_range",
                        *map(str, cmd)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return sum(1 for line in p.stderr.splitlines() if "fsync(" in line or "fdatasync(" in line)


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize("mode", ["--runs", "--steps"])
def test_to_jsonl_fsyncs_only_when_durable(runs, tmp_path, mode):
    pack = tmp_path / "p.a2pack"
    run("pack", "--input", runs, "--output", pack)
    fast, durable = tmp_path / "fast.jsonl", tmp_path / "durable.jsonl"
    assert _fsyncs([CLI, "to-jsonl", "--packfile", pack, "--output", fast, mode]) == 0
    assert _fsyncs([CLI, "to-jsonl", "--packfile", pack, "--output", durable, mode, "--durable"]) >= 1
    assert fast.read_bytes() == durable.read_bytes()
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]
    py = tmp_path / "py.jsonl"
    a2pack.PackReader(pack).to_jsonl(py, mode=mode[2:], durable=True)
    assert py.read_bytes() == fast.read_bytes()
