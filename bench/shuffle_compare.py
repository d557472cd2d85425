"""The feed's two shuffles side by side: the index shuffle (a keyed bijection
computed batch by batch, the default) against the stored permutation (a
Fisher-Yates permutation made for each epoch), over the same dataset in the
same run.

For each it reports, at 0 ms steps (the loop takes batches as fast as they
come): rows per second delivered (median of --repeat passes, the two orders
interleaved), the time from Feed(...) to the first batch, and the resident
memory the feed adds over --epochs epochs beside its ring. Then, on the same
rows loaded as a feed loads them, the memory's limit for random rows
(bench_dataset --probe: each core's loads independent, prefetched ahead, as
many misses in flight as it takes) with the feed's two producer threads,
and what the feed delivers of it.

Usage: python3 bench/shuffle_compare.py [--rows N ...] [--batches K] [--repeat R]
Datasets of N rows are made by bench_dataset (synthetic runs) and reused.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import a2pack

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dataset_compare import ensure_dataset, find_bench_bin  # noqa: E402  (bench/)
from results import emit  # noqa: E402

COLUMNS = ("exponents", "moves", "legal", "ev_values")
KINDS = {"index": True, "stored": "stored"}


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def open_feed(ds, kind, **kw):
    return a2pack.Feed(ds, batch_size=4096, depth=4, threads=2, columns=COLUMNS,
                       shuffle=KINDS[kind], seed=1, **kw)


def first_batch_s(ds, kind):
    t = time.perf_counter()
    feed = open_feed(ds, kind)
    next(feed)
    dt = time.perf_counter() - t
    feed.close()
    return dt


def rows_per_s(ds, kind, batches):
    feed = open_feed(ds, kind)
    next(feed)  # the first batch is timed on its own
    t = time.perf_counter()
    rows = 0
    for _ in range(batches):
        rows += next(feed).rows
    dt = time.perf_counter() - t
    feed.close()
    return rows / dt


def memory(path, kind, epochs):
    """(peak resident bytes the feed added, ring bytes), measured in a fresh
    process: in this one, memory earlier feeds freed stays resident and
    would be reused unseen."""
    out = subprocess.run([sys.executable, __file__, "--memory-of", str(path), kind, str(epochs)],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


def memory_here(path, kind, epochs):
    ds = a2pack.Dataset(path)
    before = rss()
    feed = open_feed(ds, kind, epochs=epochs)
    st = feed.stats()
    peak = 0
    for i, b in enumerate(feed):
        if i % 64 == 0:
            peak = max(peak, rss() - before)
    grown = rss() - before
    feed.close()
    return max(peak, grown), st["slots"] * st["slot_bytes"]


def memory_limit(path, threads=2):
    """bench_dataset --probe over the dataset at `path`: its JSON line."""
    out = subprocess.run([str(find_bench_bin()), f"--probe={path}", f"--threads={threads}"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[4_000_000, 100_000_000])
    ap.add_argument("--dataset", help=argparse.SUPPRESS)
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--memory-of", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_of:
        path, kind, epochs = args.memory_of
        print(*memory_here(path, kind, int(epochs)))
        return
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| rows | order | rows/s (0 ms steps) | ratio | first batch | memory added (peak) | ring |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in args.rows:
        path = ensure_dataset(argparse.Namespace(dataset=None, rows=n))
        ds = a2pack.Dataset(path)
        speeds = {k: [] for k in KINDS}
        for _ in range(args.repeat):
            for k in KINDS:
                speeds[k].append(rows_per_s(ds, k, args.batches))
        med = {k: statistics.median(v) for k, v in speeds.items()}
        for k in KINDS:
            first = min(first_batch_s(ds, k) for _ in range(3))
            mem = ring = None
            if not args.no_memory:
                mem, ring = memory(path, k, args.epochs)
            mem_s = f"{mem / 2**20:.1f} MiB" if mem is not None else "-"
            ring_s = f"{ring / 2**20:.1f} MiB" if ring is not None else "-"
            print(f"| {n:,} | {k} | {med[k] / 1e6:.1f} M | {med[k] / med['stored']:.2f} "
                  f"| {first * 1e3:.1f} ms | {mem_s} | {ring_s} |", flush=True)
        limit = memory_limit(path)
        print(f"memory limit for random rows, 2 threads: {limit['probe_2'] / 1e6:.1f} M rows/s "
              f"(prefetch {limit['probe_2_ahead']} ahead; 1 thread {limit['probe_1'] / 1e6:.1f} M); "
              f"a2pack's column gather {limit['gather_2'] / 1e6:.1f} M (1 thread "
              f"{limit['gather_1'] / 1e6:.1f} M); the feed (index shuffle) delivers "
              f"{med['index'] / limit['probe_2']:.0%} of the limit", flush=True)
        emit("shuffle_compare", f"index shuffle, {n:,} rows, 0 ms steps", med["index"],
             "stored permutation", med["stored"], "rows/s", target=0.9,
             bound=limit["probe_2"], bound_name="memory-parallelism probe, 2 threads")
        print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
