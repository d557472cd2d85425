#!/usr/bin/env bash
# Turn the generated runs into a step dataset (steps.npy + metadata.db +
# manifest.json), append more runs atomically, print its statistics, verify
# it, and sample training batches from Python with their gather times.
set -euo pipefail
ds="$DEMO_DIR/dataset"
"$A2PACK" dataset build --input "$DEMO_DIR/runs" --out "$ds"
"$A2PACK" gen --runs 40 --out "$DEMO_DIR/more-runs" --seed 4096 --policy greedy
"$A2PACK" dataset append --dataset "$ds" --input "$DEMO_DIR/more-runs"
"$A2PACK" dataset stats --dataset "$ds"
"$A2PACK" dataset verify --dataset "$ds"
ls -l "$ds"
"$PYTHON" - "$ds" <<'PY'
import sqlite3, sys, time
import numpy as np
import a2pack

path = sys.argv[1]
# The files are plain formats: numpy and sqlite3 read them directly.
steps = np.load(f"{path}/steps.npy")
runs = sqlite3.connect(f"{path}/metadata.db").execute("SELECT COUNT(*) FROM runs").fetchone()[0]
print(f"np.load: {steps.shape[0]} rows of {steps.dtype.itemsize} bytes; sqlite3: {runs} runs")

t = time.perf_counter()
ds = a2pack.Dataset(path)
print(f"a2pack.Dataset: {len(ds)} rows, {ds.num_runs} runs, loaded and CRC-checked "
      f"in {(time.perf_counter() - t) * 1e3:.1f} ms")
best = ds.filter_by_score(lo=int(np.median(
    sqlite3.connect(f"{path}/metadata.db").execute("SELECT max_score FROM runs").fetchall())))
train, val = ds.split(0.1, seed=0)
print(f"runs scoring at least the median: {len(best)} steps; split: {len(train)} train / "
      f"{len(val)} validation steps (run-disjoint)")
sampler = a2pack.EpochSampler(train, batch_size=4096, seed=0)
for i, idx in enumerate(sampler):
    if i == 3:
        break
    t = time.perf_counter()
    exps, moves, legal, ev = ds.get_batch_columns(idx)
    dt = time.perf_counter() - t
    print(f"batch {i}: {len(idx)} steps gathered in {dt * 1e6:.0f} us -> exponents {exps.shape} "
          f"{exps.dtype}, moves {moves.shape}, legal {legal.shape} {legal.dtype}, "
          f"ev_values {ev.shape} {ev.dtype}; first move {moves[0]}, ev {ev[0]}")
PY
