"""Data logger from Python against a pyarrow baseline (docs/logger.md).

    A2PACK_LIBRARY=build/liba2pack.so PYTHONPATH=bindings/python \\
        python3 bench/logger_compare.py [--records 1000000] [--cpp build/bench/bench_logger]

For n = 1, 16 and 256 non-zeros per record (the "sim" workload of
bench_logger.cpp: 64 streams, slowly drifting supports, random-walk values at
value_scale 1e-3) it measures, in the same run:

  * a2pack per call      DataLogger.record() once per record
  * a2pack batched       DataLogger.record_batch() with 65 536 records a call
  * pyarrow IPC + zstd   the same columns (stream_id uint32, epoch float64,
                         indices list<uint32>, values list<float64>) written
                         with pyarrow's IPC stream writer, zstd compression,
                         65 536 rows a batch: the baseline
  * decode               a2pack.logger.decode() of the folder (MB/s of
                         decompressed frames) against reading the IPC stream

All timings include close()/flush to disk. With --cpp, the C++ benchmark
binary runs afterwards (C numbers: encode, record(), end to end, one frame per record,
decode).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import a2pack
from a2pack import logger


def sim_pool(n, rng, n_streams=64):
    """Records of the sim workload: (sids, epochs, offsets, indices, values)."""
    count = max(20000, (4 << 20) // (3 * n + 6))
    universe = max(1024, 16 * n)
    supports = [np.sort(rng.choice(universe, size=n, replace=False)) for _ in range(n_streams)]
    vals = [rng.normal(size=n) for _ in range(n_streams)]
    idx_out = np.empty((count, n), np.uint32)
    val_out = np.empty((count, n), np.float64)
    sids = np.arange(count, dtype=np.uint32) % n_streams
    for r in range(count):
        s = r % n_streams
        sup, v = supports[s], vals[s]
        repl = rng.random(n) < 0.05
        for k in np.flatnonzero(repl):
            while True:
                x = rng.integers(universe)
                if x not in sup:
                    break
            sup[k] = x
            v[k] = rng.normal()
        v += 0.02 * rng.normal(size=n)
        order = np.argsort(sup, kind="stable")
        sup[:] = sup[order]
        v[:] = v[order]
        idx_out[r] = sup
        val_out[r] = v
    epochs = (np.arange(count) // n_streams) * 0.1
    return sids, epochs, idx_out, val_out


def take(pool, total):
    """`total` records cycling the pool, epochs moving on each pass."""
    sids, epochs, idx, val = pool
    count = len(sids)
    reps = -(-total // count)
    span = epochs[-1] + 1.0
    s = np.tile(sids, reps)[:total]
    e = (np.tile(epochs, reps) + np.repeat(np.arange(reps) * span, count))[:total]
    i = np.tile(idx, (reps, 1))[:total]
    v = np.tile(val, (reps, 1))[:total]
    return s, e, i, v


def du(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def bench_n(n, total, per_call_total, tmp):
    rng = np.random.default_rng(n)
    pool = sim_pool(n, rng)
    s, e, idx, val = take(pool, total)
    flat_i, flat_v = idx.reshape(-1), val.reshape(-1)
    offsets = np.arange(total + 1, dtype=np.uint64) * n
    out = {}

    # a2pack per call
    d = os.path.join(tmp, f"percall-{n}")
    m = min(per_call_total, total)
    with a2pack.DataLogger(d) as log:
        ids = [log.register_stream({"entity": k}, epoch_scale=1e-3, value_scale=1e-3) for k in range(64)]
        rec = log.record
        sl = s[:m].tolist()
        el = e[:m].tolist()
        t = time.perf_counter()
        for r in range(m):
            rec(ids[sl[r]], el[r], idx[r], val[r])
        log.flush()
        out["per_call"] = m / (time.perf_counter() - t)
    shutil.rmtree(d)

    # a2pack batched
    d = os.path.join(tmp, f"batch-{n}")
    chunk = 65536
    t = time.perf_counter()
    with a2pack.DataLogger(d) as log:
        for k in range(64):
            log.register_stream({"entity": k}, epoch_scale=1e-3, value_scale=1e-3)
        for a in range(0, total, chunk):
            b = min(total, a + chunk)
            log.record_batch(s[a:b], e[a:b], offsets[a:b + 1] - offsets[a], flat_i[a * n:b * n],
                             flat_v[a * n:b * n])
    out["batched"] = total / (time.perf_counter() - t)
    out["a2pack_bytes"] = du(os.path.join(d, "segments")) / total

    # decode
    for workers in (1, 0):
        t = time.perf_counter()
        data = logger.decode(d, workers=workers)
        dt = time.perf_counter() - t
        assert len(data) == total
        out[f"decode_w{workers}"] = data.summary["raw_bytes"] / dt / 1e6
        out[f"decode_rec_w{workers}"] = total / dt
        del data
    shutil.rmtree(d)

    # pyarrow IPC stream + zstd
    import pyarrow as pa

    schema = pa.schema([("stream_id", pa.uint32()), ("epoch", pa.float64()),
                        ("indices", pa.list_(pa.uint32())), ("values", pa.list_(pa.float64()))])
    path = os.path.join(tmp, f"ipc-{n}.arrows")
    t = time.perf_counter()
    with pa.OSFile(path, "wb") as f:
        opts = pa.ipc.IpcWriteOptions(compression="zstd")
        with pa.ipc.new_stream(f, schema, options=opts) as w:
            for a in range(0, total, chunk):
                b = min(total, a + chunk)
                off = pa.array((offsets[a:b + 1] - offsets[a]).astype(np.int32))
                w.write_batch(pa.record_batch([
                    pa.array(s[a:b], pa.uint32()), pa.array(e[a:b], pa.float64()),
                    pa.ListArray.from_arrays(off, pa.array(flat_i[a * n:b * n], pa.uint32())),
                    pa.ListArray.from_arrays(off, pa.array(flat_v[a * n:b * n], pa.float64()))],
                    schema=schema))
        f.flush()
        os.fsync(f.fileno())
    out["ipc"] = total / (time.perf_counter() - t)
    out["ipc_bytes"] = os.path.getsize(path) / total
    t = time.perf_counter()
    with pa.OSFile(path, "rb") as f:
        table = pa.ipc.open_stream(f).read_all()
    out["ipc_read_rec"] = table.num_rows / (time.perf_counter() - t)
    del table
    os.remove(path)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000, help="records per n (batched, IPC)")
    ap.add_argument("--per-call", type=int, default=200_000, help="records for the per-call loop")
    ap.add_argument("--cpp", help="path of the bench_logger binary to run afterwards")
    args = ap.parse_args()
    from results import emit  # bench/results.py: the summary table of `make bench`

    tmp = tempfile.mkdtemp(prefix="a2pack-logger-compare-")
    try:
        print(f"a2pack {a2pack.__version__}, numpy {np.__version__}, "
              f"pyarrow {__import__('pyarrow').__version__}, {os.cpu_count()} CPUs")
        print(f"{'n':>4} {'per call':>10} {'batched':>10} {'IPC+zstd':>10} {'B/rec':>7} "
              f"{'IPC B/rec':>9} {'decode 1w':>10} {'decode all':>10} {'IPC read':>10}")
        for n in (1, 16, 256):
            total = args.records if n < 256 else max(1, args.records // 8)
            r = bench_n(n, total, args.per_call if n < 256 else args.per_call // 4, tmp)
            print(f"{n:>4} {r['per_call'] / 1e6:>8.2f}M/s {r['batched'] / 1e6:>8.2f}M/s "
                  f"{r['ipc'] / 1e6:>8.2f}M/s {r['a2pack_bytes']:>7.1f} {r['ipc_bytes']:>9.1f} "
                  f"{r['decode_w1']:>6.0f}MB/s {r['decode_w0']:>6.0f}MB/s "
                  f"{r['ipc_read_rec'] / 1e6:>6.1f}Mr/s", flush=True)
            emit("logger_compare", f"record, {n} values per record, batched", r["batched"],
                 "pyarrow IPC stream + zstd", r["ipc"], "records/s")
        print("records/s include flush to disk; B/rec = bytes on disk per record; decode in MB/s "
              "of decompressed frames (1 worker / all cores); IPC read in records/s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.cpp:
        sys.stdout.flush()
        subprocess.run([args.cpp], check=True)


if __name__ == "__main__":
    main()
