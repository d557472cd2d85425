"""a2pack.bag against the `bagz` package (and `array_record` where it can do the
same thing), on real run payloads, one run, same machine.

Cells (per data set × .bag/.bagz): writing every record (a2pack's writer
fsyncs before it renames the file into place, bagz's does not: the
"write+fsync" row adds an fsync of the others' files); sequential iteration
over every record; random `read_indices` batches of 256 — the two reading
cells both with the files in the page cache and cold (the file's pages
dropped first; a2pack then reads with CachePolicy.DROP_AFTER_READ, so it keeps
them out of the cache as it goes).

Data sets, generated with the C++ engine through a2pack.gen:
  small  1,000,000 records of ~1 KiB (random-policy games, v2 bytes)
  large    100,000 records of ~60 KiB (expectimax depth-2 games, v2 bytes)
A pool of distinct games is cycled to reach the record count (generating a
million distinct expectimax games would take hours on this machine).

Usage: python bench/bag_compare.py [--scale 0.1] [--out DIR] [--sets small,large]
Prints a markdown table; files are deleted after each cell.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from a2pack import bag, gen

try:
    import bagz
except ImportError:  # pragma: no cover
    bagz = None
try:
    from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter
except ImportError:  # pragma: no cover
    ArrayRecordReader = ArrayRecordWriter = None


def payload_pool(kind: str, n: int, workdir: str) -> list:
    d = os.path.join(workdir, f"pool-{kind}")
    if kind == "small":
        opts = gen.GenOptions(policy="random")
    else:
        opts = gen.GenOptions(policy="expectimax", depth=2)
    gen.generate_dir(d, n, seed=2048, options=opts)
    pool = [open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))]
    shutil.rmtree(d)
    return pool


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(fn) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def files_of(path: str) -> list:
    d, b = os.path.split(path)
    return [p for p in (path, os.path.join(d, "limits." + b)) if os.path.exists(p)]


def run_set(name: str, n: int, pool: list, workdir: str, batches: int, rows: list) -> None:
    records = [pool[i % len(pool)] for i in range(n)]
    mean = sum(map(len, records)) / n
    rng = np.random.default_rng(7)
    batch_idx = [rng.integers(0, n, size=256) for _ in range(batches)]
    for ext in ("bag", "bagz"):
        cell = f"{name} {ext}"
        paths = {lib: os.path.join(workdir, f"{lib}.{ext}") for lib in ("a2pack", "bagz")}

        def write_with(m, path):
            def go():
                with m.Writer(path) as w:
                    for r in records:
                        w.write(r)
            return go

        results = {}
        results[("write", "bagz")] = timed(write_with(bagz, paths["bagz"]))
        # a2pack's writer fsyncs before its rename (durable, atomic); bagz does
        # not. "write+fsync" adds an fsync of bagz's file for a like-for-like row.
        results[("write+fsync", "bagz")] = results[("write", "bagz")] + timed(
            lambda: [_fsync(f) for f in files_of(paths["bagz"])])
        results[("write", "a2pack")] = timed(write_with(bag, paths["a2pack"]))
        results[("write+fsync", "a2pack")] = results[("write", "a2pack")]
        ar_path = os.path.join(workdir, f"ar.{ext}.array_record")
        if ArrayRecordWriter is not None:
            def ar_write():
                w = ArrayRecordWriter(ar_path, "group_size:1," + ("zstd:3" if ext == "bagz" else "uncompressed"))
                for r in records:
                    w.write(r)
                w.close()
            results[("write", "array_record")] = timed(ar_write)
            results[("write+fsync", "array_record")] = results[("write", "array_record")] + timed(
                lambda: _fsync(ar_path))

        for mode in ("cache", "drop"):
            for lib in ("bagz", "a2pack", "array_record"):
                if lib == "array_record":
                    if ArrayRecordReader is None:
                        continue
                    path = ar_path
                else:
                    path = paths[lib]
                if mode == "drop":
                    for f in files_of(path):
                        drop_cache(f)
                else:
                    for f in files_of(path):  # warm the page cache
                        with open(f, "rb") as fh:
                            while fh.read(64 << 20):
                                pass
                if lib == "a2pack":
                    opts = bag.Reader.Options(
                        cache_policy=bag.CachePolicy.DROP_AFTER_READ if mode == "drop" else bag.CachePolicy.SYSTEM)
                    r = bag.Reader(path, opts)
                elif lib == "bagz":
                    r = bagz.Reader(path)
                else:
                    r = ArrayRecordReader(path, "readahead_buffer_size:0")

                def iterate():
                    if lib == "array_record":
                        for a in range(0, n, 4096):
                            for _ in r.read(a, min(n, a + 4096)):
                                pass
                    else:
                        for _ in r:
                            pass

                def random_batches():
                    if lib == "array_record":
                        for idx in batch_idx:
                            r.read(idx.tolist())
                    else:
                        for idx in batch_idx:
                            r.read_indices(idx)

                results[(f"iterate/{mode}", lib)] = timed(iterate)
                if mode == "drop":
                    for f in files_of(path):
                        drop_cache(f)
                results[(f"batch256/{mode}", lib)] = timed(random_batches)
                del r

        for op in ("write", "write+fsync", "iterate/cache", "iterate/drop", "batch256/cache", "batch256/drop"):
            count = batches * 256 if op.startswith("batch") else n
            row = {"cell": cell, "op": op, "records": count, "mean_bytes": mean}
            for lib in ("a2pack", "bagz", "array_record"):
                t = results.get((op, lib))
                row[lib] = count / t if t else None
            rows.append(row)
            print_row(row, file=sys.stderr)
        for p in list(paths.values()) + [ar_path]:
            for f in files_of(p):
                os.remove(f)


def fmt_rate(v):
    return "—" if v is None else f"{v:,.0f}"


def print_row(row, file=sys.stdout):
    ratio = row["a2pack"] / row["bagz"] if row["bagz"] else float("nan")
    print(f"| {row['cell']} | {row['op']} | {fmt_rate(row['a2pack'])} | {fmt_rate(row['bagz'])} | "
          f"{ratio:.2f}× | {fmt_rate(row['array_record'])} |", file=file, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the record counts")
    ap.add_argument("--out", default=None, help="folder for the bench files (default: a temp dir)")
    ap.add_argument("--sets", default="small,large")
    args = ap.parse_args()
    if bagz is None:
        sys.exit("bag_compare: the bagz package is needed (pip install bagz)")
    workdir = tempfile.mkdtemp(prefix="a2pack-bag-bench-", dir=args.out)
    rows = []
    try:
        sets = args.sets.split(",")
        if "small" in sets:
            pool = payload_pool("small", 20000, workdir)
            run_set("1M×1KiB" if args.scale == 1 else f"{int(1e6 * args.scale)}×1KiB",
                    int(1_000_000 * args.scale), pool, workdir, max(10, int(2000 * args.scale)), rows)
        if "large" in sets:
            pool = payload_pool("large", 600, workdir)
            run_set("100k×60KiB" if args.scale == 1 else f"{int(1e5 * args.scale)}×60KiB",
                    int(100_000 * args.scale), pool, workdir, max(5, int(200 * args.scale)), rows)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nrecords/s, one run each, {os.cpu_count()} CPUs; ratio = a2pack / bagz\n")
    print("| data | operation | a2pack | bagz | ratio | array_record |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        print_row(row)


if __name__ == "__main__":
    main()
