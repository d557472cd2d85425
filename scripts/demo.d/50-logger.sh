#!/usr/bin/env bash
# Data logger: record a few thousand sparse vectors from two streams (two
# Python threads), decode them, inspect the folder with the CLI and export
# Parquet; print sizes and rates.
set -euo pipefail
log="$DEMO_DIR/logger"
rm -rf "$log" "$DEMO_DIR/logger.parquet"
"$PYTHON" - "$log" <<'PY'
import sys, threading, time
import numpy as np
import a2pack

folder = sys.argv[1]
n_per_stream = 5000
with a2pack.DataLogger(folder, frame_bytes=64 << 10) as log:
    streams = [log.register_stream({"model": "demo", "entity": f"cell-{k}", "measure": "rate"},
                                   epoch_scale=1e-3, value_scale=1e-4) for k in range(2)]

    def run(k):
        rng = np.random.default_rng(k)
        support = np.sort(rng.choice(4096, size=24, replace=False)).astype(np.uint32)
        value = rng.normal(size=24)
        for i in range(n_per_stream):
            value += rng.normal(scale=0.01, size=24)
            log.record(streams[k], i * 0.1, support, value)

    t = time.perf_counter()
    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for th in threads: th.start()
    for th in threads: th.join()
    log.flush()
    dt = time.perf_counter() - t
    s = log.stats()
print(f"python: recorded {s['records']} records ({s['values']} non-zeros) from 2 threads "
      f"in {dt:.2f}s ({s['records'] / dt / 1e3:.0f} k records/s per call); "
      f"{s['raw_bytes']} bytes encoded, {s['file_bytes']} on disk in {s['segments']} segment(s)")

# Batched: one call for many records.
rng = np.random.default_rng(7)
n = 100_000
lengths = rng.integers(1, 17, size=n)
offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)
indices = np.concatenate([np.sort(rng.choice(1 << 16, size=k, replace=False)) for k in lengths])
values = rng.normal(size=int(offsets[-1]))
with a2pack.DataLogger(folder) as log:
    sid = log.register_stream({"model": "demo", "entity": "batch"}, epoch_scale=1e-3, value_scale=1e-4)
    t = time.perf_counter()
    log.record_batch(sid, 500.0 + np.arange(n) * 1e-3, offsets, indices, values)
    log.flush()
    dt = time.perf_counter() - t
print(f"python: {n} records in one record_batch call + flush: {n / dt / 1e6:.2f} M records/s")

t = time.perf_counter()
data = a2pack.logger.decode(folder)
dt = time.perf_counter() - t
print(f"python: decoded {len(data)} records ({data.summary['raw_bytes'] / 1e6:.1f} MB of frames) "
      f"in {dt * 1e3:.0f} ms; streams {sorted(data.streams)}; problems {len(data.problems)}")
sid, epoch, idx, val = data[0]
print(f"python: first record: stream {sid}, epoch {epoch}, {idx.size} non-zeros, "
      f"indices[:4] {idx[:4].tolist()}, values[:2] {val[:2].tolist()}")
PY
"$A2PACK" log info "$log"
"$A2PACK" log decode "$log" --stream 1 --limit 2
"$A2PACK" log to-parquet "$log" "$DEMO_DIR/logger.parquet" --python "$PYTHON"
du -sh "$log/segments" "$DEMO_DIR/logger.parquet"
