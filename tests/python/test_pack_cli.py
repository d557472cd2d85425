"""The packfile subcommands of the `a2pack` CLI (pack, validate, stats,
to-jsonl, extract, inspect --packfile), run as a user would.

The CLI is $A2PACK_CLI, else the `a2pack` binary beside the library in use;
`make test` sets A2PACK_CLI; a missing CLI is an error, not a skip.
"""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import a2pack
from a2pack.run import Meta


from cli_util import CLI
if not CLI.exists():
    raise RuntimeError(f"no a2pack CLI at {CLI}: build it and set A2PACK_CLI")


def run(*args, ok=True):
    p = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture
def runs(tmp_path):
    d = tmp_path / "runs"
    (d / "b").mkdir(parents=True)
    files = []
    for i in range(8):
        rng = np.random.default_rng(i)
        n = 20 + i
        r = a2pack.RunV2.from_arrays(
            Meta(n, 1_700_000_000, 1.25, 10 * i, 2048, "cli-test" if i % 2 else None),
            rng.integers(0, 2**60, n, dtype=np.uint64), rng.integers(0, 4, n, dtype=np.uint8),
            rng.random((n, 4), dtype=np.float32), np.full(n, 0xF, np.uint8), None, final_board=i)
        p = (d / "b" if i < 3 else d) / f"r{i}.a2run2"
        p.write_bytes(r.to_bytes("v1", drop_branches=True) if i == 5 else r.to_bytes())
        files.append(p)
    ordered = sorted(files, key=lambda p: p.relative_to(d).parts)
    return d, ordered


def test_pack_validate_stats_extract_inspect(runs, tmp_path):
    d, files = runs
    pack = tmp_path / "p.a2pack"
    p = run("pack", "--input", d, "--output", pack, "--workers", 2)
    assert "packed 8 runs" in p.stderr and p.stdout == ""  # status on stderr, as upstream
    assert "\r" not in p.stderr  # not a terminal: no progress bar
    q = run("-q", "pack", "--input", d, "--output", tmp_path / "q.a2pack")
    assert q.stdout == q.stderr == ""  # -q: nothing but errors
    assert "OK" in run("validate", "--packfile", pack, "--full").stderr
    s = json.loads(run("stats", "--packfile", pack, "--json").stdout)
    assert s["count"] == 8 and s["min_len"] == 20 and s["max_len"] == 27
    assert s["highest_tile_hist"] == {"2048": 8}
    assert s["engine_counts"] == [[None, 4], ["cli-test", 4]]
    assert "runs: 8" in run("stats", "--packfile", pack).stdout
    out = tmp_path / "ex"
    run("extract", "--packfile", pack, "--indices", "0,5,6-7", "--output", out)
    for i in (0, 5, 6, 7):
        assert (out / f"run-{i:06d}.a2run2").read_bytes() == files[i].read_bytes()
    j = json.loads(run("inspect", "--packfile", pack, "--index", 5, "--json").stdout)
    assert j["index"] == 5 and j["kind"] == "v1" and j["entry"]["storage"] == "stored"
    assert "index         3 of 8" in run("inspect", "--packfile", pack, "--index", 3).stdout
    bad = run("inspect", "--packfile", pack, "--index", 8, ok=False)
    assert bad.returncode != 0 and "entry 8 out of range" in bad.stderr
    bad = run("extract", "--packfile", pack, "--indices", "1,zz", "--output", out, ok=False)
    assert bad.returncode != 0 and "zz" in bad.stderr


def test_to_jsonl_and_compression(runs, tmp_path):
    d, _ = runs
    plain, z = tmp_path / "p.a2pack", tmp_path / "z.a2pack"
    run("pack", "--input", d, "--output", plain, "--align", 512, "--no-crc")
    run("pack", "--input", d, "--output", z, "--compress", "zstd", "-q")
    assert a2pack.PackReader(plain).entry(0).crc32c == 0
    for mode in ("--runs", "--steps"):
        a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        run("to-jsonl", "--packfile", plain, "--output", a, mode, "--workers", 1)
        run("to-jsonl", "--packfile", z, "--output", b, mode, "--workers", 2)
        assert a.read_bytes() == b.read_bytes()
        lines = a.read_bytes().split(b"\n")
        assert lines[-1] == b"" and all(json.loads(x) for x in lines[:-1])
        assert len(lines) - 1 == (8 if mode == "--runs" else sum(range(20, 28)))
    both = run("to-jsonl", "--packfile", plain, "--output", tmp_path / "c.jsonl", "--runs",
               "--steps", ok=False)
    assert both.returncode != 0


def test_bad_inputs(runs, tmp_path):
    d, files = runs
    files[2].write_bytes(b"A2T1\x01\x00 truncated")
    pack = tmp_path / "p.a2pack"
    p = run("pack", "--input", d, "--output", pack, ok=False)
    assert p.returncode != 0 and files[2].name in p.stderr
    assert not pack.exists()
    p = run("pack", "--input", d, "--output", pack, "--skip-bad")
    assert "skipped 1" in p.stderr and files[2].name in p.stderr
    assert len(a2pack.PackReader(pack)) == 7
    data = bytearray(pack.read_bytes())
    data[30] ^= 1  # inside the index
    (tmp_path / "bad.a2pack").write_bytes(bytes(data))
    v = run("validate", "--packfile", tmp_path / "bad.a2pack", ok=False)
    assert v.returncode != 0 and "index CRC32C mismatch" in v.stderr


def test_a_damaged_entry_is_named_once(runs, tmp_path):
    """A flipped byte in entry 2's payload: every command that reads the entry
    says "PACK: entry 2" once, in one line; with --skip-bad the skipped
    line names it once too."""
    d, files = runs
    good = tmp_path / "good.a2pack"
    run("pack", d, "-o", good)
    e = json.loads(run("inspect", good, "--index", 2, "--json").stdout)["entry"]
    data = bytearray(good.read_bytes())
    data[e["offset"] + e["length"] // 2] ^= 0x5A
    bad = tmp_path / "bad2.a2pack"
    bad.write_bytes(bytes(data))
    where = f"{bad}: entry 2: offset {e['offset']}: payload CRC32C mismatch"
    for args in (["validate", bad, "--full"], ["inspect", bad, "--index", 2],
                 ["to-jsonl", bad, "-o", tmp_path / "x.jsonl"],
                 ["extract", bad, "--indices", "2", "-o", tmp_path / "ex"],
                 ["dataset", "build", bad, "-o", tmp_path / "ds"],
                 ["dataset", "build", bad, "-o", tmp_path / "ds", "--allow-missing-branches"],
                 ["bag", "convert", bad, tmp_path / "x.bagz"]):
        p = run(*args, ok=False)
        assert p.returncode == 1, (args, p.stderr)
        (line,) = p.stderr.splitlines()
        assert line.startswith(f"a2pack: error: {where}"), (args, line)
        assert line.count(str(bad)) == 1 and line.count("entry 2") == 1, (args, line)
    p = run("dataset", "build", bad, "-o", tmp_path / "ds", "--skip-bad",
            "--allow-missing-branches")
    skipped = [ln for ln in p.stderr.splitlines() if ln.startswith("a2pack: skipped")]
    assert skipped == [f"a2pack: skipped {bad}: entry 2 (A2PACK_E_CHECKSUM): offset "
                       f"{e['offset']}: payload CRC32C mismatch" + skipped[0].split("mismatch")[1]]
    assert skipped[0].count(str(bad)) == 1 and skipped[0].count("entry 2") == 1
    assert "skipped 1 bad run(s)" in p.stderr
    # A bad run file that pack --skip-bad skips: its path once.
    files[3].write_bytes(files[3].read_bytes()[:-9])
    p = run("pack", d, "-o", tmp_path / "s.a2pack", "--skip-bad")
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("a2pack: skipped")]
    assert line.startswith(f"a2pack: skipped {files[3]} (A2PACK_E_")
    assert line.count(str(files[3])) == 1, line


def test_decode_summarises_a_folder_and_names_a_bad_file(runs):
    d, files = runs
    p = run("decode", "--input", d, "--json")
    summary = json.loads(p.stdout)
    assert summary["runs"] == len(files)
    assert summary["steps"] == sum(20 + i for i in range(8))
    files[4].write_bytes(files[4].read_bytes()[:-7])  # truncated
    p = run("decode", "--input", d, ok=False)
    assert p.returncode != 0
    assert str(files[4]) in p.stderr, p.stderr
    assert not any(str(f) in p.stderr for f in files if f != files[4]), p.stderr


def test_decode_windows_skip_bad_files_anywhere_in_a_large_folder(tmp_path):
    # 150 runs: more than one window (the first holds 64 files), with a bad
    # file in the first window and one in a later one.
    d = tmp_path / "many"
    run("gen", "-n", "150", "-o", d, "--seed", "3", "--policy", "greedy", "-q")
    files = sorted(d.rglob("*.a2run2"))
    assert len(files) == 150
    whole = json.loads(run("decode", "-i", d, "--json", "-j", "2").stdout)
    files[3].write_bytes(files[3].read_bytes()[:-5])
    files[120].write_bytes(b"")
    p = run("decode", "-i", d, ok=False)
    assert str(files[3]) in p.stderr and str(files[120]) not in p.stderr, p.stderr
    s = json.loads(run("decode", "-i", d, "--json", "--skip-bad").stdout)
    assert s["runs"] == 148
    assert [x["file"] for x in s["skipped"]] == [str(files[3]), str(files[120])]
    assert "empty run payload" in s["skipped"][1]["error"]
    sizes = files[3].stat().st_size + files[120].stat().st_size
    assert s["bytes"] == sum(f.stat().st_size for f in files) - sizes
    assert s["steps"] < whole["steps"]
    strict = run("decode", "-i", d, "--skip-bad", "--strict", ok=False)
    assert "2 bad file(s) skipped" in strict.stderr


def test_extract_to_a_full_disk_fails_naming_the_reason_and_installs_no_short_file(tmp_path):
    import hostile_fs
    d = tmp_path / "runs"
    d.mkdir()
    rng = np.random.default_rng(0)
    for i in range(6):  # about 200 KiB each, so 1 MiB holds a few
        n = 20_000
        r = a2pack.RunV2.from_arrays(
            Meta(n, 1_700_000_000, 1.0, 0, 2048, None), rng.integers(0, 2**60, n, dtype=np.uint64),
            rng.integers(0, 4, n, dtype=np.uint8), rng.random((n, 4), dtype=np.float32),
            np.full(n, 0xF, np.uint8), None, final_board=i)
        (d / f"r{i}.a2run2").write_bytes(r.to_bytes())
    pack = tmp_path / "p.a2pack"
    run("pack", "--input", d, "--output", pack)
    reader = a2pack.PackReader(pack)
    with hostile_fs.small_tmpfs(tmp_path / "mnt", "1m") as mnt:
        out = mnt / "ex"
        p = run("extract", "--packfile", pack, "--indices", "0-5", "--output", out, ok=False)
        assert p.returncode == 3, p.stderr
        assert "No space left on device" in p.stderr, p.stderr
        names = sorted(os.listdir(out))
        assert names and not [n for n in names if ".tmp-" in n], names
        for name in names:
            assert (out / name).read_bytes() == reader.read(int(name[4:10]))


def test_extract_into_links_planted_at_temporary_and_final_names_writes_nothing_outside(
        runs, tmp_path):
    import hostile_fs
    d, files = runs
    pack = tmp_path / "p.a2pack"
    run("pack", "--input", d, "--output", pack)
    victim, missing = hostile_fs.make_victims(tmp_path / "outside")
    before = hostile_fs.snapshot(tmp_path / "outside")
    out = tmp_path / "ex"
    out.mkdir()
    p, release = hostile_fs.start_paused([CLI, "extract", "--packfile", pack, "--indices", "0-3",
                                          "--output", out])
    for i in range(3):
        hostile_fs.plant_links_at_temp_names(out, f"run-{i:06d}.a2run2",
                                             victim if i % 2 else missing, pids=[p.pid])
    hostile_fs.plant_link(out / "run-000003.a2run2", victim)
    _, err = release()
    assert p.returncode == 0, err
    hostile_fs.assert_nothing_written_outside(tmp_path / "outside", before)
    for i in range(4):
        f = out / f"run-{i:06d}.a2run2"
        assert not f.is_symlink() and f.read_bytes() == files[i].read_bytes()
    assert len(hostile_fs.links_left(out)) == 3 * 16
