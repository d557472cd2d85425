"""Gathering random batches from a step dataset: a2pack against numpy.

For batches of 4 096 random step indices, in the same process on the same
data: numpy fancy indexing ``steps[idx]`` and ``np.take(steps, idx)`` on the
array ``np.load`` returns (the plain numpy way), the same two on a2pack's
zero-copy ``Dataset.steps`` view, and a2pack's ``get_batch`` (1 and 2
workers) and ``get_batch_columns``. Also load times: ``np.load``, a2pack's
open (RAM + CRC check) and a plain sequential read of the file.

Methods are timed in alternating blocks of --block calls (default 100; so a
busy machine slows them alike, while one method's allocations do not disturb
the next call of another), each block opened by one untimed call (a method's
first call after another's block wakes its helper threads, which a loop
gathering batch after batch does not pay), each call on a fresh batch (from
1 024 drawn up front, so no batch's rows are still cached); the median and
the 10th percentile are reported. On the 2-vCPU development VM the 2-worker
gather needs about 1 ms of back-to-back calls after ~50 ms of other work
before it reaches its steady speed (77 us for the first call of a block, 47
after 20 calls, 41 in a steady loop), so blocks of 20 report it ~15 % slower
than blocks of 100: docs/dataset.md has the figures for both.

Usage: python3 bench/dataset_compare.py [--dataset DIR] [--rows N]
With no --dataset, a synthetic dataset of N rows (default 10 M) is written by
``bench_dataset --make-dataset`` (found beside $A2PACK_CLI, or by
$A2PACK_BENCH_BIN) into $BENCH_OUT (default bench-out/) and reused.
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

# numpy's OpenBLAS starts a helper thread per core that can spin on the core
# a2pack's second gather worker needs (measured: 2-worker get_batch 21.8 us
# median with it, 16.6 without, on the 2-vCPU VM); nothing here uses BLAS.
# As in bag_compare.py. Set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import a2pack

HERE = pathlib.Path(__file__).resolve().parent


def find_bench_bin() -> pathlib.Path:
    env = os.environ.get("A2PACK_BENCH_BIN")
    if env:
        return pathlib.Path(env)
    cli = os.environ.get("A2PACK_CLI")
    roots = [pathlib.Path(cli).resolve().parent] if cli else []
    roots.append(HERE.parent / "build")
    for r in roots:
        p = r / "bench" / "bench_dataset"
        if p.exists():
            return p
    sys.exit("dataset_compare: bench_dataset not found; build it or set A2PACK_BENCH_BIN")


def ensure_dataset(args) -> pathlib.Path:
    if args.dataset:
        return pathlib.Path(args.dataset)
    out = pathlib.Path(os.environ.get("BENCH_OUT", HERE.parent / "bench-out"))
    ds = out / f"dataset-{args.rows}"
    if (ds / "manifest.json").exists():
        return ds
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(find_bench_bin()), f"--make-dataset={ds}", f"--rows={args.rows}"],
                   check=True)
    return ds


def timed(fn, reps=1):
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--block", type=int, default=100,
                    help="calls of one method in a row before the next method's turn")
    args = ap.parse_args()
    path = ensure_dataset(args)
    steps_file = path / "steps.npy"
    size = steps_file.stat().st_size

    # ---- loading
    def plain_read():  # one read() into fresh, unzeroed memory
        with open(steps_file, "rb", buffering=0) as f:
            f.readinto(np.empty(size, np.uint8))
    loads = {}
    for _ in range(3):
        for name, fn in (("plain sequential read (1 thread)", plain_read),
                         ("np.load", lambda: np.load(steps_file)),
                         ("a2pack.Dataset (RAM, CRC checked)", lambda: a2pack.Dataset(path)),
                         ("a2pack.Dataset (RAM, no CRC)", lambda: a2pack.Dataset(path, verify=False))):
            loads.setdefault(name, []).append(timed(fn))
    print(f"dataset {path}: {size / 1e6:.0f} MB in steps.npy")
    print(f"{'load':40s} {'seconds':>9s} {'GB/s':>7s} {'vs plain read':>14s}")
    base = min(loads["plain sequential read (1 thread)"])
    for name, ts in loads.items():
        t = min(ts)
        print(f"{name:40s} {t:9.3f} {size / t / 1e9:7.2f} {base / t:13.2f}x")
    from results import emit  # bench/results.py: the summary table of `make bench`

    emit("dataset_compare", "load steps.npy into RAM, CRC checked", min(loads["a2pack.Dataset (RAM, CRC checked)"]),
         "np.load", min(loads["np.load"]), "s", higher_is_better=False, target=1.0)

    # ---- gathers
    arr = np.load(steps_file)
    ds = a2pack.Dataset(path)
    view = ds.steps
    n = len(ds)
    rng = np.random.default_rng(1)
    # 1024 batches: the rows one cycle touches (128 MB) do not fit in the L3 cache.
    batches = [rng.integers(0, n, size=args.batch, dtype=np.int64) for _ in range(1024)]
    out = np.empty(args.batch, dtype=a2pack.STEP_DTYPE)
    cols = ds.get_batch_columns(batches[0])
    methods = {
        "numpy fancy index steps[idx] (np.load)": lambda i: arr[i],
        "np.take(steps, idx) (np.load)": lambda i: np.take(arr, i),
        "numpy fancy index on Dataset.steps": lambda i: view[i],
        "np.take on Dataset.steps": lambda i: np.take(view, i),
        "a2pack get_batch (1 worker)": lambda i: ds.get_batch(i, out=out, workers=1),
        "a2pack get_batch (2 workers)": lambda i: ds.get_batch(i, out=out, workers=2),
        "a2pack get_batch, new array": lambda i: ds.get_batch(i),
        "a2pack get_batch_columns (1 worker)": lambda i: ds.get_batch_columns(i, out=cols),
        "a2pack get_batch_columns (2 workers)": lambda i: ds.get_batch_columns(i, out=cols, workers=2),
    }
    for fn in methods.values():  # warm up, and check they agree
        fn(batches[0])
    assert (ds.get_batch(batches[1]) == arr[batches[1]]).all()
    times = {k: [] for k in methods}
    k = 0
    block = max(1, args.block)
    for r in range(max(1, args.rounds // block)):
        for name, fn in methods.items():
            # One untimed call opens each block: the first call after another
            # method's block wakes helper threads that slept meanwhile, which a
            # loop gathering batch after batch does not pay.
            fn(batches[k % len(batches)])
            k += 1
            for _ in range(block):
                # A fresh batch for every call: a batch another method just
                # gathered would be in the cache.
                idx = batches[k % len(batches)]
                k += 1
                t = time.perf_counter_ns()
                fn(idx)
                times[name].append(time.perf_counter_ns() - t)
    for label, stat in (("median", statistics.median),
                        ("10th percentile (closest to an undisturbed run)",
                         lambda v: sorted(v)[len(v) // 10])):
        us = {k: stat(v) / 1e3 for k, v in times.items()}
        take = us["np.take(steps, idx) (np.load)"]
        fancy = us["numpy fancy index steps[idx] (np.load)"]
        print(f"\nbatches of {args.batch} random rows out of {n}: {label} of {args.rounds} rounds")
        print(f"{'method':42s} {'us/batch':>9s} {'Mrows/s':>8s} {'vs take':>8s} {'vs fancy':>9s}")
        for name, u in us.items():
            print(f"{name:42s} {u:9.1f} {args.batch / u:8.1f} {take / u:7.1f}x {fancy / u:8.1f}x")
        if stat is statistics.median:
            for name in ("a2pack get_batch (1 worker)", "a2pack get_batch (2 workers)"):
                cell = f"gather {args.batch} random rows of {n}, {name[len('a2pack '):]}"
                emit("dataset_compare", cell, us[name], "np.take", take, "us/batch", higher_is_better=False)
                emit("dataset_compare", cell, us[name], "numpy fancy indexing", fancy, "us/batch",
                     higher_is_better=False)


if __name__ == "__main__":
    main()
