"""Packfiles through Python: PackReader, PackWriter, pack_dir."""

import json
import math
import os
import threading

import numpy as np
import pytest

import a2pack
from a2pack.run import Meta


def make_run(seed: int, n: int, branches: bool = True, engine=None) -> a2pack.RunV2:
    rng = np.random.default_rng(seed)
    boards = rng.integers(0, 2**63, size=n, dtype=np.uint64)
    moves = rng.integers(0, 4, size=n, dtype=np.uint8)
    meta = Meta(steps=n, start_unix_s=1_700_000_000 + seed, elapsed_s=0.5 + seed,
                max_score=100 * seed, highest_tile=[512, 1024, 2048][seed % 3], engine_str=engine)
    if not branches:
        return a2pack.RunV2.from_arrays(meta, boards, moves, final_board=seed)
    values = rng.random((n, 4), dtype=np.float32)
    legal = np.full(n, 0xF, np.uint8)
    present = (np.arange(n) % 3 != 0).astype(np.uint8)
    return a2pack.RunV2.from_arrays(meta, boards, moves, values, legal, present, final_board=seed)


@pytest.fixture
def run_dir(tmp_path):
    """30 run files: every third one v1, the rest v2 (some with an engine)."""
    d = tmp_path / "runs"
    d.mkdir()
    files = []
    for i in range(30):
        if i % 3 == 1:
            r = make_run(i, 10 + i, branches=False)
            data = r.to_bytes("v1")
        else:
            r = make_run(i, 10 + i, engine="expectimax" if i % 2 else None)
            data = r.to_bytes("v2")
        p = d / f"sub{i % 2}" / f"run-{i:03d}.a2run2"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(data)
        files.append(p)
    # pack_dir's order: by path component.
    return d, sorted(files, key=lambda p: p.relative_to(d).parts)


@pytest.fixture
def packed(run_dir, tmp_path):
    d, files = run_dir
    out = tmp_path / "p.a2pack"
    s = a2pack.pack_dir(d, out, workers=2)
    assert s.entries == 30 and s.skipped == 0
    return out, files


def test_round_trip(packed):
    out, files = packed
    with a2pack.PackReader.open(out) as r:
        assert len(r) == 30
        for i, f in enumerate(files):
            data = f.read_bytes()
            assert r.read(i) == data
            assert r.kind(i) == a2pack.detect_kind(data)
            assert r.decode(i) == a2pack.RunV2.from_bytes(data)
            assert bytes(r.get_slice(i)) == data
            e = r.entry(i)
            assert e.offset % 4096 == 0 and e.raw_length == len(data) and e.compression == "none"
        assert [x.to_bytes() for x in r] == [a2pack.RunV2.from_bytes(f.read_bytes()).to_bytes()
                                             for f in files]


@pytest.mark.parametrize("compress", ["none", "zstd"])
@pytest.mark.parametrize("mmap", [True, False])
def test_batches(packed, tmp_path, compress, mmap):
    out, files = packed
    if compress == "zstd":
        z = tmp_path / "z.a2pack"
        a2pack.pack_dir(out.parent / "runs", z, compress="zstd")
        out = z
    r = a2pack.PackReader(out, mmap=mmap)
    idx = [29, 3, 3, 0, 17]
    runs = r.decode_batch(idx, workers=2)
    expect = [a2pack.RunV2.from_bytes(files[i].read_bytes()) for i in idx]
    assert runs == expect
    cols = r.decode_batch_columns(idx, workers=2)
    assert len(cols) == 5
    for k, run in enumerate(expect):
        sl = cols.run_steps(k)
        np.testing.assert_array_equal(cols.boards[sl], run.boards)
        np.testing.assert_array_equal(cols.branch_values[sl], run.branch_values)
        assert int(cols.final_boards[k]) == run.final_board
        assert int(cols.meta_steps[k]) == run.meta.steps
    assert isinstance(cols.boards, np.ndarray) and cols.boards.dtype == np.uint64
    assert r.decode_batch([]) == []
    if not mmap:
        with pytest.raises(a2pack.UnsupportedError):
            r.get_slice(0)


def test_iter_batches_depend_only_on_the_seed(packed):
    out, _ = packed
    r = a2pack.PackReader(out)
    perm = r.permutation(True, seed=5)
    assert sorted(perm.tolist()) == list(range(30))
    assert perm.tolist() == r.permutation(True, seed=5).tolist()
    assert perm.tolist() != r.permutation(True, seed=6).tolist()
    assert r.permutation(False).tolist() == list(range(30))

    def epoch(workers, columns):
        out = []
        for b in r.iter_batches(7, shuffle=True, seed=5, workers=workers, columns=columns):
            if columns:
                out.append((len(b), b.boards.tobytes()))
            else:
                out.append([x.to_bytes() for x in b])
        return out

    one = epoch(1, False)
    assert [len(b) for b in one] == [7, 7, 7, 7, 2]
    assert one == epoch(2, False) == epoch(5, False)
    assert [x for b in one for x in b] == [r.decode(int(i)).to_bytes() for i in perm]
    cols = epoch(1, True)
    assert cols == epoch(3, True)
    assert [n for n, _ in cols] == [7, 7, 7, 7, 2]
    plain = list(r.iter_batches(8))
    assert [len(b) for b in plain] == [8, 8, 8, 6]
    got = list(r.iter_indices([5, 1, 5], chunk=2))
    assert [g.to_bytes() for g in got] == [r.decode(i).to_bytes() for i in (5, 1, 5)]


def test_jsonl_is_the_same_for_any_worker_count(packed, tmp_path):
    out, files = packed
    r = a2pack.PackReader(out)
    for mode in ("runs", "steps"):
        a, b = tmp_path / f"a-{mode}.jsonl", tmp_path / f"b-{mode}.jsonl"
        na = r.to_jsonl(a, workers=1, mode=mode)
        nb = r.to_jsonl(b, workers=3, mode=mode)
        assert na == nb == a.stat().st_size
        assert a.read_bytes() == b.read_bytes()
        assert r.to_jsonl(b, parallel=False, mode=mode) == na
    lines = (tmp_path / "a-runs.jsonl").read_text().splitlines()
    assert len(lines) == 30
    first = json.loads(lines[0])
    assert list(first) == ["run_idx", "steps", "start_unix_s", "elapsed_s", "max_score",
                           "highest_tile", "final_board", "states", "moves"]
    run = r.decode(0)
    assert first["states"] == [int(x) for x in run.states]
    assert first["moves"] == [["UP", "DOWN", "LEFT", "RIGHT"][m] for m in run.moves]
    assert np.float32(first["elapsed_s"]) == np.float32(run.meta.elapsed_s)
    steps = (tmp_path / "a-steps.jsonl").read_text().splitlines()
    assert len(steps) == sum(len(r.decode(i)) for i in range(30))
    s0 = json.loads(steps[0])
    assert list(s0) == ["run_idx", "run_uuid", "step_idx", "pre_board", "chosen", "branches"]
    assert len(s0["pre_board"]) == 16 and len(s0["branches"]) == 4
    assert s0["run_uuid"].startswith("a2r-") and s0["run_uuid"].endswith("-00000000")
    with pytest.raises(ValueError):
        r.to_jsonl(tmp_path / "x.jsonl", mode="bogus")


def test_progress_callbacks_and_their_errors(packed, tmp_path):
    out, _ = packed
    r = a2pack.PackReader(out)
    seen = []
    r.validate(full=True, progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1] == (30, 30)
    with pytest.raises(a2pack.InterruptedError_):
        r.to_jsonl(tmp_path / "i.jsonl", progress=lambda d, t: False)
    assert not (tmp_path / "i.jsonl").exists()

    def boom(d, t):
        raise KeyError("from the callback")

    with pytest.raises(KeyError):
        r.validate(full=True, progress=boom)


def test_stats(packed, run_dir):
    out, files = packed
    r = a2pack.PackReader(out)
    s = r.stats
    lengths = sorted(10 + i for i in range(30))
    assert (s.count, s.total_steps, s.min_len, s.max_len) == (30, sum(lengths), 10, 39)
    assert s.mean_len == pytest.approx(sum(lengths) / 30)
    # Rust's f64::round: halves away from zero (Python's round() would go to even).
    pct = [lengths[math.floor(q * 29 + 0.5)] for q in (0.5, 0.9, 0.99)]
    assert (s.p50, s.p90, s.p99) == tuple(pct) == (25, 36, 39)
    assert s.p50_len == s.p50 and s.from_block
    assert s.highest_tile_hist == {512: 10, 1024: 10, 2048: 10}
    engines = {}
    for f in files:
        m = a2pack.RunV2.from_bytes(f.read_bytes()).meta
        engines[m.engine_str] = engines.get(m.engine_str, 0) + 1
    assert s.engine_counts == engines
    assert r.stats is s  # cached


def test_corruption(packed, tmp_path):
    out, files = packed
    good = out.read_bytes()
    r = a2pack.PackReader(out)
    # Every byte of the header and index, and of the footer.
    n = 28 + 32 * 30
    bad = tmp_path / "bad.a2pack"
    for pos in list(range(n)) + list(range(len(good) - 32, len(good))):
        b = bytearray(good)
        b[pos] ^= 0x41
        bad.write_bytes(bytes(b))
        with pytest.raises(a2pack.CorruptError):
            a2pack.PackReader(bad)
    # A corrupt payload fails only its entry.
    e = r.entry(7)
    b = bytearray(good)
    b[e.offset + 5] ^= 0xFF
    bad.write_bytes(bytes(b))
    rb = a2pack.PackReader(bad)
    with pytest.raises(a2pack.ChecksumError, match="entry 7"):
        rb.decode(7)
    with pytest.raises(a2pack.ChecksumError, match="entry 7"):
        rb.decode_batch([1, 7, 2])
    assert rb.decode(6) == r.decode(6)
    try:  # without the CRC check the damage may or may not decode
        rb.decode(7, verify=False)
    except a2pack.CorruptError as err:
        assert not isinstance(err, a2pack.ChecksumError)
    with pytest.raises(a2pack.ChecksumError):
        rb.validate(full=True)
    with pytest.raises(a2pack.OutOfRangeError):
        r.decode(30)
    with pytest.raises(IndexError):
        r.decode(-1)
    with pytest.raises(IndexError):
        r.decode_batch([0, 99])
    with pytest.raises(a2pack.CorruptError):
        a2pack.PackReader(files[0])  # a run file is not a pack
    with pytest.raises(FileNotFoundError):
        a2pack.PackReader(tmp_path / "missing.a2pack")


def test_writer_streams_and_is_atomic(tmp_path):
    runs = [make_run(i, 5 + i) for i in range(12)]
    out = tmp_path / "w.a2pack"
    with a2pack.PackWriter(out, align=256, compress="zstd") as w:
        for x in runs[:6]:
            w.add(x)
        for x in runs[6:]:
            w.add(x.to_bytes("v2"))
        assert len(w) == 12
        assert not out.exists()
    assert w.summary.entries == 12
    r = a2pack.PackReader(out)
    assert [r.decode(i) for i in range(12)] == runs
    assert all(r.entry(i).offset % 256 == 0 for i in range(12))
    # An exception inside the block abandons the pack.
    out2 = tmp_path / "abandoned.a2pack"
    with pytest.raises(RuntimeError):
        with a2pack.PackWriter(out2) as w:
            w.add(runs[0])
            raise RuntimeError("stop")
    assert not out2.exists()
    assert sorted(os.listdir(tmp_path)) == ["w.a2pack"]
    # Bad bytes are refused; the writer carries on.
    with a2pack.PackWriter(tmp_path / "x.a2pack", expected_count=1) as w:
        with pytest.raises(a2pack.CorruptError):
            w.add(b"\x00" * 10)
        w.add(runs[1])
        with pytest.raises(a2pack.InvalidArgumentError):
            w.add(runs[2])
    with pytest.raises(a2pack.ClosedError):
        w.add(runs[0])


def test_skip_bad(run_dir, tmp_path):
    d, files = run_dir
    files[4].write_bytes(files[4].read_bytes()[:-3])
    with pytest.raises(a2pack.CorruptError, match=files[4].name):
        a2pack.pack_dir(d, tmp_path / "s.a2pack")
    s = a2pack.pack_dir(d, tmp_path / "s.a2pack", skip_bad=True)
    assert (s.entries, s.skipped) == (29, 1)
    assert s.skipped_paths == [str(files[4])]
    with a2pack.PackWriter(tmp_path / "t.a2pack", skip_bad=True) as w:
        assert w.add_files(files[3:6]) == [str(files[4])]
    assert len(a2pack.PackReader(tmp_path / "t.a2pack")) == 2
    with pytest.raises(a2pack.NotFoundError):
        a2pack.pack_dir(tmp_path / "nothing-here", tmp_path / "n.a2pack")


def test_threads_share_a_reader(packed):
    out, _ = packed
    r = a2pack.PackReader(out)
    expect = [x.to_bytes() for x in r.decode_batch(range(30))]
    results = [None] * 4

    def work(k):
        results[k] = [x.to_bytes() for x in r.decode_batch(range(30), workers=2)]

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(res == expect for res in results)


def test_upstream_fixture(fixture_file, fixture_bytes, tmp_path):
    d = tmp_path / "fx"
    d.mkdir()
    (d / "example.a2run2").write_bytes(fixture_bytes)
    s = a2pack.pack_dir(d, tmp_path / "fx.a2pack")
    assert s.entries == 1 and s.input_bytes == 28211
    r = a2pack.PackReader(tmp_path / "fx.a2pack")
    assert r.read(0) == fixture_bytes
    run = r.decode(0)
    assert (run.meta.steps, run.meta.max_score, run.final_board) == (959, 20504, 0x100100010232001B)
    assert r.stats.total_steps == 959
    r.to_jsonl(tmp_path / "fx.jsonl", mode="steps")
    lines = (tmp_path / "fx.jsonl").read_text().splitlines()
    assert len(lines) == 959
    first = json.loads(lines[0])
    assert first["pre_board"] == [(0x0010000000000001 >> (60 - 4 * i)) & 0xF for i in range(16)]
    assert all(b["legal"] in (True, False) for b in first["branches"])
