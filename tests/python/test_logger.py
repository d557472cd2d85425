"""a2pack.DataLogger: round trips, rotation, bad input, backpressure, crash
safety (SIGKILLed child processes), damage reporting and Parquet export."""

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import a2pack
from a2pack import errors, logger
from a2pack._native import library_path

PKG_DIR = pathlib.Path(a2pack.__file__).resolve().parent.parent


def sparse(rng, n_max=40, universe=100000):
    n = int(rng.integers(0, n_max + 1))
    idx = np.sort(rng.choice(universe, size=n, replace=False)).astype(np.uint32)
    val = rng.normal(0, 10, size=n)
    return idx, val


def child_env():
    env = dict(os.environ)
    env["A2PACK_LIBRARY"] = library_path
    env["PYTHONPATH"] = os.pathsep.join([str(PKG_DIR), env.get("PYTHONPATH", "")])
    return env


# ------------------------------------------------------------------ round trips
def test_round_trip_many_streams_and_threads(tmp_path):
    scales = [(1e-3, 1e-6), (0.5, 0.25), (1.0, 1e-3), (2.0**-10, 1e-9)]
    n_threads, per_thread = 4, 1500
    expected = {}
    with a2pack.DataLogger(tmp_path / "log", frame_bytes=8192, rotate_bytes=1 << 18) as log:
        sids = [log.register_stream({"entity": f"e{i}", "measure": "m"}, epoch_scale=es,
                                    value_scale=vs) for i, (es, vs) in enumerate(scales)]

        def work(t):
            rng = np.random.default_rng(t)
            sid = sids[t]
            for i in range(per_thread):
                idx, val = sparse(rng)
                epoch = 100.0 + i * 0.37
                log.record(sid, epoch, idx, val)
                expected.setdefault(sid, []).append((epoch, idx, val))

        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    data = logger.decode(tmp_path / "log")
    assert len(data) == n_threads * per_thread
    assert data.problems == []
    assert data.summary["segments"] > 1  # rotation at 256 KiB
    assert data.stream_ids.dtype == np.uint32 and data.epochs.dtype == np.float64
    assert data.indices.dtype == np.uint32 and data.values.dtype == np.float64
    assert data.offsets.dtype == np.uint64 and data.offsets.shape == (len(data) + 1,)
    seen = {sid: 0 for sid in sids}
    for sid, epoch, idx, val in data:
        es, vs = scales[sid]
        want_epoch, want_idx, want_val = expected[sid][seen[sid]]
        seen[sid] += 1
        assert abs(epoch - want_epoch) <= es / 2 * (1 + 1e-9)
        np.testing.assert_array_equal(idx, want_idx)
        assert np.all(np.abs(val - want_val) <= vs / 2 + np.abs(want_val) * 1e-15)
    assert data.streams[1].labels == {"entity": "e1", "measure": "m"}
    assert data.streams[1].epoch_scale == 0.5 and data.streams[1].value_scale == 0.25
    sidecar = json.loads((tmp_path / "log" / "streams" / "1.json").read_text())
    assert sidecar["labels"] == {"entity": "e1", "measure": "m"}
    assert sidecar["value_scale"] == 0.25 and sidecar["stream_id"] == 1


def test_decode_all_segments_yields_record_tuples(tmp_path):
    with a2pack.DataLogger(tmp_path) as log:
        sid = log.register_stream({"m": 1}, epoch_scale=0.5, value_scale=0.5)
        log.record(sid, 1.0, np.array([3, 7], np.uint32), np.array([1.5, -2.0]))
        log.record(sid, 2.0, [], [])
        log.record(sid, 3.0, [1, 2, 3], [1, 2, 3])  # lists convert
        recs = list(log.decode_all_segments())  # flushes first, logger stays open
        log.record(sid, 4.0, [9], [9.0])
    assert [r[0] for r in recs] == [0, 0, 0]
    assert [r[1] for r in recs] == [1.0, 2.0, 3.0]
    assert isinstance(recs[0][0], int) and isinstance(recs[0][1], float)
    assert recs[0][2].tolist() == [3, 7] and recs[0][3].tolist() == [1.5, -2.0]
    assert recs[1][2].size == 0
    assert not recs[0][2].flags.writeable
    assert len(logger.decode(tmp_path)) == 4
    assert log.closed


def test_sort_flag_and_batches(tmp_path):
    with a2pack.DataLogger(tmp_path) as log:
        plain = log.register_stream({}, epoch_scale=1, value_scale=1)
        sorted_ = log.register_stream({}, epoch_scale=1, value_scale=1, sort=True)
        log.record(sorted_, 0, np.array([9, 2, 5], np.uint32), np.array([90.0, 20.0, 50.0]))
        with pytest.raises(errors.InvalidArgumentError, match="strictly increasing"):
            log.record(plain, 0, np.array([9, 2], np.uint32), np.array([1.0, 2.0]))
        with pytest.raises(errors.InvalidArgumentError, match="more than once"):
            log.record(sorted_, 0, np.array([4, 2, 4], np.uint32), np.array([1.0, 2.0, 3.0]))
        log.record_batch([plain, sorted_, plain], [1, 2, 3], [0, 1, 3, 3],
                         np.array([4, 8, 6], np.uint32), [40.0, 80.0, 60.0])
        log.record_batch(plain, np.arange(5.0), np.arange(6), np.arange(5), np.arange(5.0))
        with pytest.raises(errors.InvalidArgumentError, match="record 1 of the batch") as ei:
            log.record_batch(plain, [10, 11, 12], [0, 1, 3, 4], [1, 5, 2, 3], [1, 2, 3, 4])
        assert ei.value.records_done == 1
        with pytest.raises(errors.InvalidArgumentError):
            log.record_batch(plain, [1, 2], [0, 1], [1], [1.0])  # offsets too short
    data = logger.decode(tmp_path)
    rows = list(data)
    assert rows[0][2].tolist() == [2, 5, 9] and rows[0][3].tolist() == [20.0, 50.0, 90.0]
    assert rows[2][2].tolist() == [6, 8] and rows[2][3].tolist() == [60.0, 80.0]
    assert rows[3][3].size == 0
    assert len(rows) == 1 + 3 + 5 + 1


def test_rotation_makes_many_segments(tmp_path):
    rng = np.random.default_rng(3)
    with a2pack.DataLogger(tmp_path, rotate_bytes=16 << 10, frame_bytes=4096, zstd_level=-5) as log:
        sid = log.register_stream({}, epoch_scale=1, value_scale=1e-9)
        for i in range(3000):
            log.record(sid, i, *sparse(rng, 20))
    stats = log.stats()  # after close: every frame written
    segs = sorted((tmp_path / "segments").iterdir())
    assert len(segs) > 5 and stats["segments"] == len(segs)
    assert [p.name for p in segs][:3] == ["00000.seg.zst", "00001.seg.zst", "00002.seg.zst"]
    assert all(p.stat().st_size <= 16 << 10 for p in segs)
    data = logger.decode(tmp_path)
    assert len(data) == 3000 and data.epochs.tolist() == list(range(3000))


def test_compress_literals_trades_size_and_decodes_the_same(tmp_path):
    # Values of a skewed alphabet: Huffman coding shrinks them, matches rarely.
    rng = np.random.default_rng(5)
    idx = np.arange(0, 96, 3, dtype=np.uint32)
    vals = [np.where(rng.random(32) < 0.15, rng.integers(0, 5000, 32), rng.integers(0, 40, 32))
            .astype(np.float64) for _ in range(3000)]
    sizes, decoded = {}, {}
    for huffman in (False, True):
        d = tmp_path / str(huffman)
        with a2pack.DataLogger(d, compress_literals=huffman) as log:
            sid = log.register_stream({}, epoch_scale=1, value_scale=1)
            for i, v in enumerate(vals):
                log.record(sid, i, idx, v)
        sizes[huffman] = sum(p.stat().st_size for p in (d / "segments").iterdir())
        decoded[huffman] = logger.decode(d)
    assert sizes[True] < sizes[False]
    for data in decoded.values():
        assert len(data) == 3000
        np.testing.assert_array_equal(data.values, np.concatenate(vals))


# ------------------------------------------------------------------ bad input
def test_bad_input_is_refused_and_nothing_written(tmp_path):
    with a2pack.DataLogger(tmp_path) as log:
        for es, vs in [(0, 1), (1, 0), (-1, 1), (1, -2), (float("nan"), 1), (1, float("inf"))]:
            with pytest.raises(errors.InvalidArgumentError, match="scale"):
                log.register_stream({}, epoch_scale=es, value_scale=vs)
        with pytest.raises(errors.InvalidArgumentError, match="JSON"):
            log.register_stream({"x": object()}, epoch_scale=1, value_scale=1)
        sid = log.register_stream({}, epoch_scale=1, value_scale=1e-3)
        assert sid == 0
        idx = np.array([1, 2, 3], np.uint32)
        cases = [
            (dict(values=[1.0, float("nan"), 3.0]), errors.InvalidArgumentError, "NaN"),
            (dict(values=[1.0, float("inf"), 3.0]), errors.InvalidArgumentError, "inf"),
            (dict(values=[1.0, 1e300, 3.0]), errors.OutOfRangeError, "int64"),
            (dict(indices=[3, 2, 1]), errors.InvalidArgumentError, "strictly increasing"),
            (dict(indices=[1, 1, 2]), errors.InvalidArgumentError, "strictly increasing"),
            (dict(indices=[1, 2]), errors.InvalidArgumentError, "3 entries|2 entries"),
            (dict(indices=[-1, 2, 3]), errors.OutOfRangeError, "uint32"),
            (dict(indices=[1, 2, 2**32]), errors.OutOfRangeError, "uint32"),
            (dict(indices=[1.0, 2.5, 3.0]), errors.InvalidArgumentError, "integers"),
            (dict(indices=[[1, 2, 3]]), errors.InvalidArgumentError, "one-dimensional"),
            (dict(values=["a", "b", "c"]), errors.InvalidArgumentError, "numbers"),
            (dict(epoch=float("nan")), errors.InvalidArgumentError, "epoch"),
            (dict(epoch=1e300), errors.OutOfRangeError, "epoch"),
            (dict(stream_id=7), errors.InvalidArgumentError, "stream 7 is not registered"),
        ]
        for kw, exc, pattern in cases:
            args = dict(stream_id=sid, epoch=1.0, indices=idx, values=[1.0, 2.0, 3.0])
            args.update(kw)
            with pytest.raises(exc, match=pattern):
                log.record(args["stream_id"], args["epoch"], args["indices"], args["values"])
        log.record(sid, 5.0, idx, [1.0, 2.0, 3.0])
    data = logger.decode(tmp_path)
    assert len(data) == 1 and data.epochs.tolist() == [5.0]
    assert list(data.streams) == [0]


def test_closed_logger_refuses_work_and_close_is_idempotent(tmp_path):
    log = a2pack.DataLogger(tmp_path)
    sid = log.register_stream({}, epoch_scale=1, value_scale=1)
    log.record(sid, 0, [1], [1])
    log.close()
    log.close()
    assert log.closed
    with pytest.raises(errors.ClosedError):
        log.record(sid, 1, [1], [1])
    with pytest.raises(errors.ClosedError):
        log.flush()
    with pytest.raises(errors.ClosedError):
        log.register_stream({}, epoch_scale=1, value_scale=1)
    assert len(logger.decode(tmp_path)) == 1
    with pytest.raises(errors.InvalidArgumentError):
        a2pack.DataLogger(tmp_path, when_full="drop")


def test_second_logger_on_a_folder_is_refused(tmp_path):
    with a2pack.DataLogger(tmp_path):
        with pytest.raises(errors.IoError, match="another logger"):
            a2pack.DataLogger(tmp_path)
    a2pack.DataLogger(tmp_path).close()


# ------------------------------------------------------------------ backpressure
def test_backpressure_blocks_without_loss(tmp_path):
    # zstd level 19 on 4 KiB frames with a 16 KiB ring: batches from three
    # threads encode hundreds of times faster than one writer compresses.
    n_threads, per_thread = 3, 4000
    with a2pack.DataLogger(tmp_path, ring_bytes=16 << 10, frame_bytes=4096, zstd_level=19,
                           writer_threads=1) as log:
        sid = log.register_stream({}, epoch_scale=1, value_scale=1e-6)

        def work(t):
            rng = np.random.default_rng(t)
            lengths = rng.integers(0, 30, size=per_thread)
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            idx = np.concatenate([np.sort(rng.choice(10**6, size=k, replace=False)) for k in lengths])
            log.record_batch(sid, t * per_thread + np.arange(per_thread, dtype=float), offsets, idx,
                             rng.normal(size=offsets[-1]))

        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        log.flush()
        stats = log.stats()
    assert stats["full_events"] > 0
    assert stats["max_queued_bytes"] <= (16 << 10) + (n_threads + 1) * 4096
    data = logger.decode(tmp_path)
    assert sorted(data.epochs.tolist()) == list(range(n_threads * per_thread))


def test_full_mode_raises_then_accepts(tmp_path):
    # A batch outruns a slow writer: FullError says how far it got; the
    # caller retries the rest, and nothing is lost or duplicated.
    n = 20000
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 30, size=n)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(10**6, size=k, replace=False)) for k in lengths])
    values = rng.normal(size=offsets[-1])
    fulls = 0
    with a2pack.DataLogger(tmp_path, ring_bytes=8192, frame_bytes=4096, zstd_level=19,
                           when_full="raise", writer_threads=1) as log:
        sid = log.register_stream({}, epoch_scale=1, value_scale=1e-6)
        start = 0
        while start < n:
            try:
                log.record_batch(sid, np.arange(start, n, dtype=float), offsets[start:] - offsets[start],
                                 indices[offsets[start]:], values[offsets[start]:])
                start = n
            except errors.FullError as e:
                fulls += 1
                start += e.records_done
                time.sleep(0.001)
    assert fulls > 0
    data = logger.decode(tmp_path)
    assert data.epochs.tolist() == list(range(n))
    np.testing.assert_array_equal(data.indices, indices)
    assert np.all(np.abs(data.values - values) <= 0.5e-6)


# ------------------------------------------------------------------ crashes
CHILD = textwrap.dedent("""
    import os, sys, random
    import numpy as np
    import a2pack
    out = os.fdopen(int(sys.argv[2]), "w", buffering=1)
    rng = random.Random(int(sys.argv[3]))
    log = a2pack.DataLogger(sys.argv[1], frame_bytes=4096, rotate_bytes=32768, flush_interval_ms=2)
    sid = log.register_stream({"child": 1}, epoch_scale=1, value_scale=0.5)
    nxt = rng.randrange(300)
    for i in range(10**7):
        n = i % 11
        log.record(sid, i, np.arange(n, dtype=np.uint32) * 3 + (i % 5),
                   (np.arange(n) + i) * 0.5)
        if i == nxt:
            log.flush()
            out.write(f"{i + 1}\\n")
            nxt = i + 1 + rng.randrange(600)
""")


def test_sigkill_at_random_points_keeps_every_flushed_record(tmp_path):
    rng = random.Random(11)
    env = child_env()
    iterations, total = 8, 0
    for it in range(iterations):
        d = tmp_path / f"run{it}"
        r, w = os.pipe()
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(d), str(w), str(rng.randrange(10**6))],
                                pass_fds=(w,), env=env)
        os.close(w)
        # Wait for the first flush so the kill lands while records flow.
        reader = os.fdopen(r)
        first = reader.readline()
        assert first, "child died before its first flush"
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        flushed = int(first)
        for line in reader:
            if line.endswith("\n"):
                flushed = int(line)
        reader.close()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", logger.DecodeWarning)
            data = logger.decode(d)
        segs = sorted((d / "segments").iterdir())
        for p in data.problems:  # only the newest segment's tail may be torn
            assert p.path == str(segs[-1]), p
        n = len(data)
        assert n >= flushed, f"iteration {it}: {flushed} flushed, {n} decoded"
        assert data.epochs.tolist() == list(range(n))
        for i in (0, flushed - 1, n - 1):
            _, _, idx, val = data[i]
            k = i % 11
            assert idx.tolist() == (np.arange(k) * 3 + (i % 5)).tolist()
            assert val.tolist() == ((np.arange(k) + i) * 0.5).tolist()
        total += n
    assert total > 0


def test_exit_without_close_flushes_at_exit(tmp_path):
    code = textwrap.dedent(f"""
        import a2pack
        log = a2pack.DataLogger({str(tmp_path)!r}, flush_interval_ms=0)
        sid = log.register_stream({{}}, epoch_scale=1, value_scale=1)
        for i in range(1000):
            log.record(sid, i, [i], [i])
    """)
    subprocess.run([sys.executable, "-c", code], env=child_env(), check=True)
    assert logger.decode(tmp_path).epochs.tolist() == list(range(1000))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_closed_error_and_exits_cleanly(tmp_path):
    log = a2pack.DataLogger(tmp_path)
    sid = log.register_stream({}, epoch_scale=1, value_scale=1)
    log.record(sid, 0, [1], [1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        pid = os.fork()
    if pid == 0:
        code = 0
        try:
            log.record(sid, 1, [1], [1.0])
            code = 1
        except errors.ClosedError:
            pass
        except BaseException:
            code = 2
        log.close()  # must neither hang nor abort in the child
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    log.record(sid, 2, [2], [2.0])
    log.close()
    assert logger.decode(tmp_path).epochs.tolist() == [0.0, 2.0]


# ------------------------------------------------------------------ damage
# The first 12 bytes of every block header the logger writes (version 3).
HEADER_PREFIX = b"\x5a\x2a\x4d\x18\x30\x00\x00\x00A2LG"


def test_torn_tail_is_reported_and_strict_raises(tmp_path):
    with a2pack.DataLogger(tmp_path, frame_bytes=4096) as log:
        sid = log.register_stream({}, epoch_scale=1, value_scale=1)
        for i in range(3000):
            log.record(sid, i, np.arange(20, dtype=np.uint32), np.full(20, float(i)))
    seg = tmp_path / "segments" / "00000.seg.zst"
    # Cut the last frame's payload in half (a write cut short by a crash);
    # after it comes the segment's closing frame, a 56-byte header alone.
    blob = seg.read_bytes()
    last = blob.rfind(HEADER_PREFIX, 0, len(blob) - 56)
    compressed_len = int.from_bytes(blob[last + 16:last + 20], "little")
    assert last > 0 and last + 56 + compressed_len == len(blob) - 56
    with open(seg, "r+b") as f:
        f.truncate(last + 56 + compressed_len // 2)
    with pytest.warns(logger.DecodeWarning, match="truncated"):
        data = logger.decode(tmp_path)
    assert 0 < len(data) < 3000
    assert data.epochs.tolist() == list(range(len(data)))
    (p,) = data.problems
    assert p.path == str(seg) and p.offset > 0 and p.status == "A2PACK_E_CORRUPT"
    with pytest.raises(errors.CorruptError, match=str(seg)):
        logger.decode(tmp_path, strict=True)
    with pytest.raises(errors.NotFoundError):
        logger.decode(tmp_path / "missing")


# ------------------------------------------------------------------ parquet
def test_parquet_schema_rows_and_metadata(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    rng = np.random.default_rng(9)
    rows = []
    with a2pack.DataLogger(tmp_path / "log") as log:
        a = log.register_stream({"entity": "a"}, epoch_scale=0.25, value_scale=0.125)
        b = log.register_stream({"entity": "b"}, epoch_scale=0.25, value_scale=0.125)
        for i in range(500):
            sid = a if i % 3 else b
            idx, _ = sparse(rng, 12)
            val = rng.integers(-100, 100, size=idx.size) * 0.125
            log.record(sid, i * 0.25, idx, val)
            rows.append((sid, i * 0.25, idx.tolist(), val.tolist()))
        log.to_parquet(tmp_path / "out.parquet")
    t = pq.read_table(tmp_path / "out.parquet")
    assert t.num_rows == 500
    assert t.schema.field("stream_id").type == pa.uint32()
    assert t.schema.field("epoch").type == pa.float64()
    assert t.schema.field("indices").type == pa.list_(pa.uint32())
    assert t.schema.field("values").type == pa.list_(pa.float64())
    got = list(zip(*(t.column(c).to_pylist() for c in ("stream_id", "epoch", "indices", "values"))))
    assert got == rows
    meta = json.loads(t.schema.metadata[b"a2pack.logger.streams"])
    assert meta["0"]["labels"] == {"entity": "a"} and meta["1"]["value_scale"] == 0.125
    # The module's command line (what `a2pack log to-parquet` runs).
    out = subprocess.run([sys.executable, "-m", "a2pack.logger", "to-parquet", str(tmp_path / "log"),
                          str(tmp_path / "cli.parquet")], env=child_env(), capture_output=True,
                         text=True, check=True)
    assert "wrote 500 records" in out.stderr
    assert pq.read_table(tmp_path / "cli.parquet").num_rows == 500


def test_parquet_without_pyarrow_names_the_package(tmp_path, monkeypatch):
    with a2pack.DataLogger(tmp_path) as log:
        log.register_stream({}, epoch_scale=1, value_scale=1)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match="pyarrow"):
        logger.decode(tmp_path).to_parquet(tmp_path / "x.parquet")


# ------------------------------------------------------------------ CLI
def cli_path():
    p = pathlib.Path(os.environ.get("A2PACK_CLI", pathlib.Path(library_path).parent / "a2pack"))
    return p if p.is_file() and os.access(p, os.X_OK) else None


def test_cli_log_info_decode_to_parquet(tmp_path):
    cli = cli_path()
    if cli is None:
        pytest.skip("a2pack CLI not found beside the library (set A2PACK_CLI)")
    with a2pack.DataLogger(tmp_path / "log") as log:
        sid = log.register_stream({"entity": "x"}, epoch_scale=1, value_scale=0.5)
        for i in range(100):
            log.record(sid, i, [i, i + 1], [0.5 * i, 1.0])
    info = json.loads(subprocess.run([str(cli), "log", "info", "--json", str(tmp_path / "log")],
                                     capture_output=True, text=True, check=True).stdout)
    assert info["records"] == 100 and info["streams"][0]["labels"] == {"entity": "x"}
    lines = subprocess.run([str(cli), "log", "decode", "-n", "3", str(tmp_path / "log")],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert json.loads(lines[2]) == {"stream_id": 0, "epoch": 2, "indices": [2, 3],
                                    "values": [1, 1]}
    pytest.importorskip("pyarrow")
    env = child_env()
    subprocess.run([str(cli), "log", "to-parquet", str(tmp_path / "log"), str(tmp_path / "o.parquet")],
                   env=env, check=True, capture_output=True)
    import pyarrow.parquet as pq
    assert pq.read_table(tmp_path / "o.parquet").num_rows == 100


# ------------------------------------------------------------------ hardening
def _small_log(path, n=500, rotate=None):
    kw = {"frame_bytes": 4096}
    if rotate:
        kw["rotate_bytes"] = rotate
    with a2pack.DataLogger(path, **kw) as log:
        a = log.register_stream({"s": "a"}, epoch_scale=1, value_scale=1e-6)
        b = log.register_stream({"s": "b"}, epoch_scale=1, value_scale=0.5)
        rng = np.random.default_rng(7)
        for i in range(n):
            log.record(a, i, [1, 5, 9], [0.25, 1.5, -2.0])
            log.record(b, i, [i % 7, 20], [float(i), float(rng.integers(1 << 40))])


def _run_cli(*args):
    cli = cli_path()
    if cli is None:
        pytest.skip("a2pack CLI not found beside the library (set A2PACK_CLI)")
    return subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True)


def test_sidecar_scale_bit_flip_is_reported_not_applied(tmp_path):
    _small_log(tmp_path)
    side = tmp_path / "streams" / "0.json"
    text = side.read_text()
    assert '"scales_crc32c"' in text and "1e-06" in text
    side.write_text(text.replace("1e-06", "1e-07"))  # one flipped bit ('6' -> '7')
    with pytest.warns(logger.DecodeWarning, match="scales_crc32c mismatch"):
        data = logger.decode(tmp_path)
    assert set(data.stream_ids.tolist()) == {1}  # nothing of stream 0 at a wrong scale
    assert data.problems[0].path == str(side)
    assert data.problems[0].status == "A2PACK_E_CHECKSUM"
    with pytest.raises(errors.ChecksumError, match="0.json"):
        logger.decode(tmp_path, strict=True)
    r = _run_cli("log", "decode", "--strict", tmp_path)
    assert r.returncode != 0 and "0.json" in r.stderr
    r = _run_cli("log", "info", "--json", tmp_path)
    info = json.loads(r.stdout)
    assert info["problems"][0]["path"] == str(side)
    assert info["problems"][0]["status"] == "A2PACK_E_CHECKSUM"


def test_missing_segment_is_a_problem_and_an_empty_one_a_note(tmp_path):
    _small_log(tmp_path, 3000, rotate=8 << 10)
    segs = sorted((tmp_path / "segments").iterdir())
    assert len(segs) >= 3
    segs[0].unlink()
    with pytest.warns(logger.DecodeWarning, match="00000.seg.zst is missing"):
        data = logger.decode(tmp_path)
    assert data.problems[0].path == str(segs[0]) and not data.problems[0].note
    assert 0 < len(data) < 6000
    r = _run_cli("log", "decode", "--strict", tmp_path)
    assert r.returncode != 0 and "00000.seg.zst" in r.stderr
    r = _run_cli("log", "info", tmp_path)
    assert r.returncode == 0 and "00000.seg.zst is missing" in r.stderr
    # Put back an empty segment 0: a note, not damage; strict still fails.
    segs[0].write_bytes(b"")
    with pytest.warns(logger.DecodeWarning, match="note: .*empty segment"):
        data = logger.decode(tmp_path)
    (p,) = data.problems
    assert p.note and p.status == "A2PACK_OK" and data.summary["notes"] == 1
    r = _run_cli("log", "info", tmp_path)
    assert r.returncode == 0 and "a2pack: note:" in r.stderr and "notes      1" in r.stdout
    assert _run_cli("log", "info", "--strict", tmp_path).returncode != 0


def test_decode_limits_are_options_and_name_the_limit(tmp_path):
    _small_log(tmp_path, 2000)
    full = logger.decode(tmp_path)
    with pytest.warns(logger.DecodeWarning, match="max_records"):
        data = logger.decode(tmp_path, max_records=1000)
    assert 0 < len(data) <= 1000
    assert data.stream_ids.tolist() == full.stream_ids[:len(data)].tolist()
    with pytest.warns(logger.DecodeWarning, match="max_frame_records"):
        logger.decode(tmp_path, max_frame_records=2)
    with pytest.raises(errors.Error, match="max_frame_bytes"):
        logger.decode(tmp_path, max_frame_bytes=100, strict=True)
    assert len(logger.decode(tmp_path, max_bytes=full.summary["raw_bytes"])) == len(full)
    r = _run_cli("log", "decode", "--max-records", "10", "--strict", tmp_path)
    assert r.returncode != 0 and "--max-records" in r.stderr
    r = _run_cli("log", "info", "--json", "--max-records", "10", tmp_path)
    assert json.loads(r.stdout)["records"] <= 10


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def test_forged_counts_with_good_crcs_skip_one_frame(tmp_path):
    _small_log(tmp_path, 3000, rotate=32 << 10)
    seg = tmp_path / "segments" / "00000.seg.zst"
    blob = bytearray(seg.read_bytes())
    # The second frame's header: raw_len 2 GiB, 715 M records, CRC recomputed.
    first_len = int.from_bytes(blob[16:20], "little")
    h = 56 + first_len
    assert blob[h + 8:h + 12] == b"A2LG"
    blob[h + 20:h + 24] = (1 << 31).to_bytes(4, "little")
    blob[h + 24:h + 28] = (715_000_000).to_bytes(4, "little")
    blob[h + 28:h + 32] = (1_000_000_000).to_bytes(4, "little")
    blob[h + 52:h + 56] = _crc32c(bytes(blob[h:h + 52])).to_bytes(4, "little")
    seg.write_bytes(bytes(blob))
    with pytest.warns(logger.DecodeWarning, match="content size"):
        data = logger.decode(tmp_path)
    (p,) = data.problems
    assert p.path == str(seg) and p.offset == h
    assert len(data) > 5000
    r = _run_cli("log", "info", tmp_path)
    assert r.returncode == 0 and f"offset {h}" in r.stderr and "memory" not in r.stderr


def test_single_folder_layout_segments_decode(tmp_path):
    zstd = pytest.importorskip("zstandard")

    def varint(v):
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)

    def zz(v):
        return (v << 1) ^ (v >> 63)

    (tmp_path / "streams").mkdir()
    (tmp_path / "streams" / "0.json").write_text(json.dumps(
        {"stream_id": 0, "epoch_scale": 0.001, "value_scale": 0.01,
         "labels": {"entity": "cell-0"}}))
    cctx = zstd.ZstdCompressor(level=1)
    last, expect = 0, []
    for s in range(2):  # two segments; deltas run on across them
        blob = b""
        for i in range(s * 50, s * 50 + 50):
            tick, idx = 7 * i + 3, [i % 4, i % 4 + 3]
            q = [i, -i]
            rec = varint(0) + varint(zz(tick - last)) + varint(len(idx)) + varint(idx[0])
            rec += varint(idx[1] - idx[0] - 1) + b"".join(varint(zz(v)) for v in q)
            last = tick
            blob += cctx.compress(rec)
            expect.append((tick / 1000, idx, [v / 100 for v in q]))
        (tmp_path / f"{s:05}.seg.zst").write_bytes(blob)
    data = logger.decode(tmp_path)
    assert data.problems == [] and len(data) == 100
    assert data.streams[0].labels == {"entity": "cell-0"}
    got = [(e, i.tolist(), v.tolist()) for _, e, i, v in data]
    assert got == expect
    r = _run_cli("log", "decode", "-n", "1", tmp_path)
    assert json.loads(r.stdout) == {"stream_id": 0, "epoch": 0.003, "indices": [0, 3],
                                    "values": [0, 0]}


# ------------------------------------------------------------------ third pass
def _blocks(blob):
    """(offset, bytes) of each block of a version-3 segment."""
    out, pos = [], 0
    while pos < len(blob):
        assert blob[pos:pos + 12] == HEADER_PREFIX
        end = pos + 56 + int.from_bytes(blob[pos + 16:pos + 20], "little")
        out.append((pos, blob[pos:end]))
        pos = end
    return out


def _v3_header(flags, clen, raw, nrec, payload_crc, seq, count, segment=0):
    h = bytearray(HEADER_PREFIX + bytes([3, flags, 0, 0]))
    for v in (clen, raw, nrec, 0, payload_crc, segment, seq):
        h += v.to_bytes(4, "little")
    h += count.to_bytes(8, "little")
    return bytes(h + _crc32c(bytes(h)).to_bytes(4, "little"))


def _empty_record_bomb(path, frames, n):
    """A folder whose segment holds `frames` valid frames of `n` empty records."""
    zstd = pytest.importorskip("zstandard")
    with a2pack.DataLogger(path) as log:
        log.register_stream({}, epoch_scale=1, value_scale=1)
    raw = (3 * n).to_bytes(4, "little") + bytes(3 * n)
    z = zstd.ZstdCompressor(level=3, write_content_size=True).compress(raw)
    crc = _crc32c(z)
    blob = b""
    for k in range(frames):
        blob += _v3_header(0, len(z), len(raw), n, crc, k, k * n) + z
    blob += _v3_header(1, 0, 0, 0, 0, frames, frames * n)
    (path / "segments").mkdir(exist_ok=True)
    (path / "segments" / "00000.seg.zst").write_bytes(blob)
    return blob


def test_frames_that_expand_too_far_for_their_size_are_refused(tmp_path):
    # A hostile folder: 8 frames of 16 777 215 empty records in ~25 KB.
    blob = _empty_record_bomb(tmp_path, 8, 16_777_215)
    assert len(blob) < 64 << 10
    with pytest.warns(logger.DecodeWarning, match="max_expansion"):
        data = logger.decode(tmp_path)
    assert len(data) == 0 and len(data.problems) == 8
    assert all(p.status == "A2PACK_E_OUT_OF_RANGE" for p in data.problems)
    with pytest.raises(errors.Error, match="max_expansion"):
        logger.decode(tmp_path, strict=True)
    r = _run_cli("log", "info", "--json", tmp_path)
    assert r.returncode == 0
    info = json.loads(r.stdout)
    assert info["records"] == 0 and len(info["problems"]) == 8
    assert "--max-expansion" in info["problems"][0]["message"]
    assert _run_cli("log", "decode", "--strict", tmp_path).returncode != 0
    # A smaller one decodes once the caller raises the limit.
    small = tmp_path / "small"
    _empty_record_bomb(small, 2, 50_000)
    with pytest.warns(logger.DecodeWarning):
        assert len(logger.decode(small)) == 0
    assert len(logger.decode(small, max_expansion=1 << 20)) == 100_000
    r = _run_cli("log", "info", "--json", "--max-expansion", str(1 << 20), small)
    assert json.loads(r.stdout)["records"] == 100_000


def test_removed_repeated_and_cut_frames_are_reported(tmp_path):
    _small_log(tmp_path, 3000)
    seg = tmp_path / "segments" / "00000.seg.zst"
    full = seg.read_bytes()
    blocks = _blocks(full)
    assert blocks[-1][1][13] == 1  # the closing frame
    clean = logger.decode(tmp_path, strict=True)
    # Frame 4 removed.
    off4, b4 = blocks[4]
    seg.write_bytes(full[:off4] + full[off4 + len(b4):])
    with pytest.warns(logger.DecodeWarning, match="frame 4 of the segment .* missing"):
        data = logger.decode(tmp_path)
    (p,) = data.problems
    assert p.path == str(seg) and p.offset == off4 and p.status == "A2PACK_E_NOT_FOUND"
    assert len(data) < len(clean)
    with pytest.raises(errors.NotFoundError, match=f"offset {off4}"):
        logger.decode(tmp_path, strict=True)
    r = _run_cli("log", "decode", "--strict", tmp_path)
    assert r.returncode != 0 and str(seg) in r.stderr and f"offset {off4}" in r.stderr
    r = _run_cli("log", "info", tmp_path)
    assert r.returncode == 0 and "missing" in r.stderr
    # Frame 2 twice: reported, decoded once.
    off2, b2 = blocks[2]
    seg.write_bytes(full[:off2 + len(b2)] + b2 + full[off2 + len(b2):])
    with pytest.warns(logger.DecodeWarning, match="frame 2 again"):
        data = logger.decode(tmp_path)
    assert len(data) == len(clean)
    # Cut exactly before the closing frame: the segment was not closed.
    cut = blocks[-1][0]
    seg.write_bytes(full[:cut])
    with pytest.warns(logger.DecodeWarning, match="without its closing frame"):
        data = logger.decode(tmp_path)
    (p,) = data.problems
    assert p.offset == cut and len(data) == len(clean)
    assert _run_cli("log", "info", "--strict", tmp_path).returncode != 0


def test_every_file_in_segments_is_read_or_reported(tmp_path):
    _small_log(tmp_path, 200)
    odd = tmp_path / "segments" / "99999999999.seg.zst"
    odd.write_bytes((tmp_path / "segments" / "00000.seg.zst").read_bytes())
    with pytest.warns(logger.DecodeWarning, match="not read"):
        data = logger.decode(tmp_path)
    (p,) = data.problems
    assert p.path == str(odd) and p.status == "A2PACK_E_OUT_OF_RANGE"
    assert len(data) == 400
    r = _run_cli("log", "info", "--strict", tmp_path)
    assert r.returncode != 0 and "99999999999.seg.zst" in r.stderr
