"""Damaged and unusual inputs the pack, run and file-opening code must name
rather than misread or wait on: a stats block that lies, index entries that
point at another entry's payload, FIFOs given as inputs, and v2 runs whose
meta.steps disagrees with the steps they store. Every damaged input is made
here from a good one.

CLI calls run in a subprocess with a timeout, so a regression (a command that
blocks on a FIFO) fails the test instead of hanging the suite.
"""

import json
import os
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest

import a2pack
from a2pack.run import Meta, StepsMismatchWarning

from cli_util import CLI

if not CLI.exists():
    raise RuntimeError(f"no a2pack CLI at {CLI}: build it and set A2PACK_CLI")

TIMEOUT = 30  # seconds: far above what any of these commands needs


def cli(*args, ok=None):
    p = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True,
                       timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    if ok is True:
        assert p.returncode == 0, p.stderr
    if ok is False:
        assert p.returncode != 0, p.stdout
    return p


def make_run(seed, n, steps=None, v1=False):
    rng = np.random.default_rng(seed)
    meta = Meta(n if steps is None else steps, 1_700_000_000 + seed, 0.5, 100 * seed, 2048, None)
    r = a2pack.RunV2.from_arrays(meta, rng.integers(0, 2**60, n, dtype=np.uint64),
                                 rng.integers(0, 4, n, dtype=np.uint8), final_board=seed)
    return r.to_bytes("v1" if v1 else "v2")


def pack_of(tmp_path, payloads, name="p.a2pack"):
    d = tmp_path / (name + ".runs")
    d.mkdir()
    for i, b in enumerate(payloads):
        (d / f"r{i:03d}.a2run2").write_bytes(b)
    out = tmp_path / name
    cli("pack", "--input", d, "--output", out, "-q", ok=True)
    return out


def footer(b):
    data_end, index_crc, data_crc, stats_offset = struct.unpack_from("<QIIQ", b, len(b) - 32)
    return data_end, index_crc, data_crc, stats_offset


def crc32c(data):
    """CRC32C (Castagnoli), bit by bit: only ever over a few hundred bytes here."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def reindex(b, count):
    """Recompute the index CRC and the footer CRC after editing the index."""
    b = bytearray(b)
    fo = len(b) - 32
    struct.pack_into("<I", b, fo + 8, crc32c(bytes(b[28:28 + 32 * count])))
    struct.pack_into("<I", b, fo + 24, crc32c(bytes(b[fo:fo + 24])))
    return bytes(b)


# ------------------------------------------------------------------ stats block
def test_a_flipped_total_in_the_stats_block_is_refused_with_both_values(tmp_path):
    pack = pack_of(tmp_path, [make_run(i, 40 + i) for i in range(6)])
    good = pack.read_bytes()
    so = footer(good)[3]
    body = so + 4
    # count (6: one byte), then total_steps: flip its lowest bit.
    total = sum(40 + i for i in range(6))
    assert good[body] == 6 and good[body + 1:body + 3] == bytes([total & 0x7F | 0x80, total >> 7])
    bad = bytearray(good)
    bad[body + 1] ^= 0x01
    pack.write_bytes(bytes(bad))
    for args in (["stats", "--packfile", pack], ["stats", "--packfile", pack, "--json"],
                 ["validate", "--packfile", pack]):
        p = cli(*args, ok=False)
        assert p.returncode == 1, p.stderr
        assert str(pack) in p.stderr and "stats block" in p.stderr, p.stderr
        assert str(total ^ 1) in p.stderr, p.stderr  # the value the block now says
    # Entries still read; the full check names the differing field and both values.
    cli("inspect", "--packfile", pack, "--index", 0, ok=True)
    p = cli("validate", "--packfile", pack, "--full", "-q", ok=False)
    assert f"total_steps {total ^ 1} (the runs: {total})" in p.stderr, p.stderr
    with a2pack.PackReader.open(pack) as r:
        with pytest.raises(a2pack.CorruptError, match="stats block"):
            r.stats


def test_full_validate_prints_a_differing_mean_len_with_enough_digits(tmp_path):
    pack = pack_of(tmp_path, [make_run(i, 30 + i) for i in range(3)])
    good = pack.read_bytes()
    body = footer(good)[3] + 4
    # count, total, min, max: one-byte varints here; then the f64 mean.
    mean_at = body + 4
    (mean,) = struct.unpack_from("<d", good, mean_at)
    assert mean == 31.0
    bad = bytearray(good)
    bad[mean_at] ^= 0x01  # the lowest mantissa bit: 31.000000000000004
    pack.write_bytes(bytes(bad))
    (flipped,) = struct.unpack_from("<d", bad, mean_at)
    p = cli("validate", "--packfile", pack, "--full", "-q", ok=False)
    assert f"mean_len {flipped!r} (the runs: 31)" in p.stderr, p.stderr
    # A flip in the exponent is caught without reading a run.
    bad = bytearray(good)
    bad[mean_at + 6] ^= 0x10
    pack.write_bytes(bytes(bad))
    (flipped,) = struct.unpack_from("<d", bad, mean_at)
    p = cli("stats", "--packfile", pack, ok=False)
    assert "mean_len" in p.stderr and "= 31" in p.stderr, p.stderr


# ------------------------------------------------------------------ overlapping entries
def test_an_entry_pointed_at_another_entrys_payload_is_refused_at_open(tmp_path):
    # v1 runs: each ends with its own CRC32C, so every payload's CRC32C is the
    # same constant and the index CRC stays right after the redirection.
    pack = pack_of(tmp_path, [make_run(i, 20 + 3 * i, v1=True) for i in range(4)])
    good = pack.read_bytes()
    e0 = struct.unpack_from("<QIHHI", good, 28)
    e1 = struct.unpack_from("<QIHHI", good, 28 + 32)
    assert e0[4] == e1[4]  # the same CRC32C
    bad = bytearray(good)
    struct.pack_into("<QI", bad, 28 + 32, e0[0], e0[1])
    pack.write_bytes(reindex(bad, 4))
    for args in (["inspect", "--packfile", pack, "--index", 1], ["validate", "--packfile", pack],
                 ["stats", "--packfile", pack], ["extract", "--packfile", pack, "--indices", "1",
                                                  "--output", tmp_path / "ex"]):
        p = cli(*args, ok=False)
        assert p.returncode == 1, p.stderr
        assert "entries 0 and 1 overlap" in p.stderr and str(pack) in p.stderr, p.stderr
        assert f"[{e0[0]}, {e0[0] + e0[1]})" in p.stderr, p.stderr
    with pytest.raises(a2pack.CorruptError, match="entries 0 and 1 overlap"):
        a2pack.PackReader.open(pack)
    # An entry starting inside the previous one.
    bad = bytearray(good)
    e2 = struct.unpack_from("<QI", good, 28 + 64)
    struct.pack_into("<Q", bad, 28 + 64, e1[0] + 16)
    assert e2[1] < len(good)
    pack.write_bytes(reindex(bad, 4))
    p = cli("validate", "--packfile", pack, ok=False)
    assert "entries 1 and 2 overlap" in p.stderr and f"offset {e1[0] + 16}" in p.stderr, p.stderr


# ------------------------------------------------------------------ FIFOs
@pytest.fixture
def fifo_inputs(tmp_path):
    """A FIFO in the place of each kind of input. No writer ever opens them:
    a reader that opened one with a plain open(2) would wait forever."""
    f = {}
    for name in ("p.a2pack", "r.a2run2", "b.bag", "b.bagz"):
        os.mkfifo(tmp_path / name)
        f[name] = tmp_path / name
    # A dataset whose manifest.json is a FIFO.
    runs = tmp_path / "runs"
    runs.mkdir()
    for i in range(3):
        (runs / f"r{i}.a2run2").write_bytes(make_run(i, 10 + i))
    ds = tmp_path / "ds"
    a2pack.build_dataset(runs, ds, allow_missing_branches=True)
    (ds / "manifest.json").unlink()
    os.mkfifo(ds / "manifest.json")
    f["dataset"] = ds
    # A logger folder whose stream sidecar is a FIFO.
    log_dir = tmp_path / "log"
    with a2pack.DataLogger(log_dir) as log:
        sid = log.register_stream({"k": "v"}, epoch_scale=1e-3, value_scale=1e-6)
        log.record(sid, 0.5, np.array([2, 9], np.uint32), np.array([0.25, -1.0]))
    sidecars = list((log_dir / "streams").glob("*.json"))
    assert len(sidecars) == 1
    sidecars[0].unlink()
    os.mkfifo(sidecars[0])
    f["log"] = log_dir
    f["sidecar"] = sidecars[0]
    return f


def test_cli_commands_refuse_a_fifo_input_at_once(fifo_inputs):
    f = fifo_inputs
    cases = [
        (["validate", "--packfile", f["p.a2pack"]], f["p.a2pack"]),
        (["validate", "--packfile", f["p.a2pack"], "--full"], f["p.a2pack"]),
        (["stats", "--packfile", f["p.a2pack"]], f["p.a2pack"]),
        (["inspect", "--packfile", f["p.a2pack"], "--index", 0], f["p.a2pack"]),
        (["inspect", "--run", f["r.a2run2"]], f["r.a2run2"]),
        (["extract", "--packfile", f["p.a2pack"], "--indices", "0", "--output", f["dataset"].parent / "ex"], f["p.a2pack"]),
        (["to-jsonl", "--packfile", f["p.a2pack"], "--output", f["dataset"].parent / "o.jsonl"], f["p.a2pack"]),
        (["bag", "info", f["b.bag"]], f["b.bag"]),
        (["bag", "info", f["b.bagz"]], f["b.bagz"]),
        (["bag", "info", f["b.bag"], "--cache", "drop"], f["b.bag"]),
        (["bag", "info", f["b.bag"], "--cache", "direct"], f["b.bag"]),
        (["bag", "convert", f["b.bag"], f["dataset"].parent / "c.bagz"], f["b.bag"]),
        (["bag", "convert", f["p.a2pack"], f["dataset"].parent / "c2.bagz"], f["p.a2pack"]),
        (["dataset", "stats", "-d", f["dataset"]], f["dataset"] / "manifest.json"),
    ]
    for args, path in cases:
        p = cli(*args, ok=False)  # a hang would raise TimeoutExpired
        assert f"{path}: is a FIFO (named pipe), not a regular file" in p.stderr, (args, p.stderr)
        assert p.returncode == 2, (args, p.returncode, p.stderr)


def test_log_info_reports_a_fifo_sidecar_without_waiting(fifo_inputs):
    f = fifo_inputs
    # A bad sidecar is a problem of its stream (the records are skipped and
    # reported); --strict fails on it. Either way at once, naming the path.
    p = cli("log", "info", f["log"])
    assert f"{f['sidecar']}: is a FIFO (named pipe), not a regular file" in p.stdout + p.stderr, p
    p = cli("log", "info", f["log"], "--strict", ok=False)
    assert f"{f['sidecar']}: is a FIFO" in p.stderr, p.stderr


def test_python_readers_refuse_a_fifo_at_once(fifo_inputs):
    f = fifo_inputs
    code = r"""
import sys, a2pack, a2pack.logger
path, kind = sys.argv[1], sys.argv[2]
try:
    if kind == "pack": a2pack.PackReader.open(path)
    elif kind == "pack-pread": a2pack.PackReader.open(path, mmap=False)
    elif kind == "run": a2pack.RunV2.load(path)
    elif kind == "runs": a2pack.load_batch([path])
    elif kind == "bag": a2pack.bag.Reader(path)
    elif kind == "dataset": a2pack.Dataset(path)
    elif kind == "log": a2pack.logger.decode(path, strict=True)
except a2pack.errors.Error as e:
    print(type(e).__name__, e)
    sys.exit(0)
print("no error")
sys.exit(1)
"""
    cases = [("pack", f["p.a2pack"], f["p.a2pack"]), ("pack-pread", f["p.a2pack"], f["p.a2pack"]),
             ("run", f["r.a2run2"], f["r.a2run2"]), ("runs", f["r.a2run2"], f["r.a2run2"]),
             ("bag", f["b.bag"], f["b.bag"]), ("dataset", f["dataset"], f["dataset"] / "manifest.json"),
             ("log", f["log"], f["sidecar"])]
    for kind, arg, named in cases:
        p = subprocess.run([sys.executable, "-c", code, str(arg), kind], capture_output=True,
                           text=True, timeout=TIMEOUT, env=os.environ.copy())
        assert p.returncode == 0, (kind, p.stdout, p.stderr)
        assert f"{named}: is a FIFO (named pipe), not a regular file" in p.stdout, (kind, p.stdout)


# ------------------------------------------------------------------ meta.steps
FORGED = (4_294_967_295, 0, 1)


@pytest.mark.parametrize("claim", FORGED)
def test_inspect_and_decode_warn_on_a_forged_meta_steps_and_fail_under_strict(tmp_path, claim):
    d = tmp_path / "runs"
    d.mkdir()
    f = d / "forged.a2run2"
    f.write_bytes(make_run(7, 150, steps=claim))
    why = f"meta.steps {claim} but the run stores 150 steps"
    p = cli("inspect", "--run", f, ok=True)
    assert f"warning: {f}: {why}" in p.stderr, p.stderr
    assert f"steps         150 (meta.steps {claim})" in p.stdout
    p = cli("inspect", "--run", f, "--strict", ok=False)
    assert p.returncode == 1 and why in p.stderr and p.stdout == ""
    p = cli("decode", "--input", d, "--json", ok=True)
    assert f"{f}: {why}" in p.stderr and json.loads(p.stdout)["steps_mismatched"] == 1
    p = cli("decode", "--input", d, "--json", "-q", ok=True)  # -q: only data and errors
    assert p.stderr == "" and json.loads(p.stdout)["steps_mismatched"] == 1
    p = cli("decode", "--input", d, "--strict", "-q", ok=False)
    assert p.returncode == 1 and why in p.stderr
    # In a pack: inspect warns (or fails under --strict), validate --strict fails.
    pack = tmp_path / "p.a2pack"
    cli("pack", "--input", d, "--output", pack, "-q", ok=True)
    p = cli("inspect", "--packfile", pack, "--index", 0, ok=True)
    assert f"{pack}: entry 0: {why}" in p.stderr, p.stderr
    cli("inspect", "--packfile", pack, "--index", 0, "--strict", ok=False)
    assert "OK" in cli("validate", "--packfile", pack, "--full", ok=True).stderr  # as upstream
    for full in ([], ["--full"]):
        p = cli("validate", "--packfile", pack, "--strict", *full, ok=False)
        assert p.returncode == 1 and f"entry 0: {why}" in p.stderr, p.stderr
    # The stats block says what the runs claim; stats reports it as it is.
    s = json.loads(cli("stats", "--packfile", pack, "--json", ok=True).stdout)
    assert s["max_len"] == claim
    # Python: a warning on single-run reads, a field on every run and batch.
    with pytest.warns(StepsMismatchWarning, match=why):
        r = a2pack.RunV2.load(f)
    assert not r.meta_steps_ok and r.meta.steps == claim and len(r) == 150
    with a2pack.PackReader.open(pack) as pr:
        with pytest.warns(StepsMismatchWarning, match="entry 0"):
            pr.decode(0)
        assert list(pr.decode_batch_columns([0]).steps_mismatch()) == [0]
    assert list(a2pack.load_batch([f]).steps_mismatch()) == [0]


def test_upstream_fixture_passes_every_strict_check_without_a_warning(tmp_path, fixture_file):
    FIXTURE = fixture_file
    d = tmp_path / "runs"
    d.mkdir()
    f = d / "example.a2run2"
    f.write_bytes(FIXTURE.read_bytes())
    p = cli("inspect", "--run", FIXTURE, "--strict", ok=True)
    assert p.stderr == "" and "959" in p.stdout
    assert cli("decode", "--input", d, "--strict", "-q", ok=True).stderr == ""
    pack = tmp_path / "p.a2pack"
    cli("pack", "--input", d, "--output", pack, "-q", ok=True)
    assert cli("validate", "--packfile", pack, "--full", "--strict", "-q", ok=True).stderr == ""
    assert cli("inspect", "--packfile", pack, "--index", 0, "--strict", ok=True).stderr == ""
    assert cli("stats", "--packfile", pack, ok=True).stderr == ""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = a2pack.RunV2.load(FIXTURE)
        assert r.meta_steps_ok
        with a2pack.PackReader.open(pack) as pr:
            pr.decode(0)
            assert pr.stats.count == 1
        assert a2pack.load_batch([FIXTURE]).steps_mismatch().size == 0
