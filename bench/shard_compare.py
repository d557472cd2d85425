"""Reading a dataset twice the memory budget: the shard stream's block
shuffle against random gathers from the memory-mapped whole file and
against LitData's shuffled StreamingDataset over the same rows.

    python bench/shard_compare.py [--rows 4000000] [--budget-mb 64] [--shard-rows 262144]

Each reader runs one epoch's worth of 4 096-row batches in a process of its
own, from a cold page cache (the files' pages dropped with posix_fadvise),
and - where this process may create a cgroup-v1 memory group, as root on
these VMs - with its memory limited to what it had before the pass plus the
budget (and 32 MiB of slack), so the page cache cannot hold the dataset
either: the mapped file then pays what random access costs on a dataset
larger than RAM. Reported: delivered M steps/s, the bytes read from storage
per row delivered (/proc/self/io read_bytes), and the shuffle quality of
its batches:

  run share    the mean fraction of a batch drawn from its most common run
  shard share  the mean fraction drawn from its most common shard
  shards       the mean number of shards a batch draws from

beside the same figures for uniform sampling (what a fully random
permutation gives). The synthetic dataset (bench_dataset --make-dataset,
reused) is written a second time in the sharded layout with the same rows.
"""

import argparse
import json
import os
import pathlib
import sqlite3
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import a2pack
from a2pack.dataset_rows import RunMeta, write_dataset

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dataset_compare import ensure_dataset  # noqa: E402  (bench/)


def read_bytes():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def drop_cache(folder):
    for p in pathlib.Path(folder).rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def ensure_sharded(single, shard_rows):
    out = single.parent / f"{single.name}-shards-{shard_rows}"
    if (out / "manifest.json").exists():
        return out
    rows = np.load(single / "steps.npy", mmap_mode="r")
    db = sqlite3.connect(f"file:{single / 'metadata.db'}?mode=ro", uri=True)
    runs = []
    for n, first, score, tile, engine, start, el in db.execute(
            "SELECT num_steps, first_step_idx, max_score, highest_tile, engine, start_time, "
            "elapsed_s FROM runs ORDER BY id"):
        runs.append((RunMeta(n, score, tile, engine, start, el), rows[first:first + n]))
    write_dataset(out, runs, shard_rows=shard_rows, source_input=str(single),
                  source_kind="bench")
    return out


class Quality:
    def __init__(self, run_of_row, shard_of_row):
        self.run_of_row, self.shard_of_row = run_of_row, shard_of_row
        self.run_share, self.shard_share, self.shards = [], [], []

    def add(self, idx):
        n = len(idx)
        runs = np.unique(self.run_of_row[idx], return_counts=True)[1]
        shards = np.unique(self.shard_of_row[idx], return_counts=True)[1]
        self.run_share.append(runs.max() / n)
        self.shard_share.append(shards.max() / n)
        self.shards.append(len(shards))

    def row(self):
        return (float(np.mean(self.run_share)), float(np.mean(self.shard_share)),
                float(np.mean(self.shards)))


def memory_groups():
    """This process's cgroup-v1 memory folder, or None."""
    try:
        with open("/proc/self/cgroup") as f:
            mine = next(line.split(":", 2)[2].strip() for line in f
                        if line.split(":", 2)[1] == "memory")
        return pathlib.Path("/sys/fs/cgroup/memory") / mine.lstrip("/")
    except (OSError, StopIteration, IndexError):
        return None


def remove_empty_groups():
    base = memory_groups()
    for g in base.glob("a2pack-bench-*") if base else ():
        try:
            g.rmdir()  # refused while a process is in it
        except OSError:
            pass


def limit_memory(limit):
    """Move this process into a new cgroup-v1 memory group that may charge
    `limit` bytes (page cache included) on top of what it held when it
    moved (cgroup v1 leaves earlier charges where they were); the group's
    path, or None when this process may not (then the pass runs unlimited,
    and says so)."""
    base = memory_groups()
    if base is None:
        return None
    try:
        g = base / f"a2pack-bench-{os.getpid()}"
        g.mkdir()
        (g / "cgroup.procs").write_text(str(os.getpid()))
        used = int((g / "memory.usage_in_bytes").read_text())
        (g / "memory.limit_in_bytes").write_text(str(used + limit))
        return g
    except OSError:
        return None


def timed_pass(name, folder, batches, make, quality, limit=None):
    # Limited first, then cold: what the reader maps or loads from here on is
    # charged to the group and read from storage.
    group = limit_memory(limit) if limit else None
    drop_cache(folder)
    r0 = read_bytes()
    it = make()
    warm_rows = 0
    for _ in range(2):  # start-up (threads, the first window) outside the timing
        warm_rows += len(next(it))
    t = time.perf_counter()
    rows = 0
    for _ in range(batches - 2):
        idx = next(it)
        rows += len(idx)
        quality.add(idx)
    dt = time.perf_counter() - t
    read = read_bytes() - r0  # start-up included: the whole pass's reads
    peak = None
    if group is not None:
        peak = int((group / "memory.max_usage_in_bytes").read_text())
    return {"name": name, "steps_s": rows / dt, "read_per_row": read / max(rows + warm_rows, 1),
            "quality": quality.row(), "limited": group is not None, "peak": peak}


def shard_stream(folder, batch, budget, seed):
    s = a2pack.ShardStream(folder, batch_size=batch, budget_bytes=budget, seed=seed,
                           columns=("indices", "exponents", "moves", "legal", "ev_values"))
    while True:
        b = s.next_batch()
        if b is None:
            continue
        yield b["indices"]


def numpy_memmap(single, batch, seed):
    rows = np.load(single / "steps.npy", mmap_mode="r")
    rng = np.random.default_rng(seed)
    while True:
        idx = rng.integers(0, len(rows), size=batch, dtype=np.int64)
        b = rows[idx]  # fancy indexing copies the rows out
        int(b["move"].sum())  # touch the data
        yield idx


def mmap_random(single, batch, seed):
    # huge_pages=False: with the transparent-huge-page hint a fault on a cold
    # file mapping reads a whole 2 MiB (the kernel's huge-page read-around,
    # which ignores MADV_RANDOM) - the fastest gathers once cached, the
    # slowest from storage.
    ds = a2pack.Dataset(single, mmap=True, verify=False, huge_pages=False)
    n = len(ds)
    rng = np.random.default_rng(seed)
    while True:
        idx = rng.integers(0, n, size=batch, dtype=np.int64)
        ds.get_batch_columns(idx)
        yield idx


def litdata_block(single, n, batch, seed, work, chunk_rows):
    import litdata as ld

    out = work / f"litdata-index-{n}-{chunk_rows}"
    if not (out / "index.json").exists():
        ds = a2pack.Dataset(single)
        exps, moves, legal, ev = ds.get_batch_columns(np.arange(n, dtype=np.int64))
        np.savez(out.with_suffix(".npz"), exps=exps, moves=moves, legal=legal, ev=ev)
        ld.optimize(fn=_litdata_rows,
                    inputs=[(str(out.with_suffix(".npz")), a, min(n, a + chunk_rows))
                            for a in range(0, n, chunk_rows)],
                    output_dir=str(out), chunk_bytes="8MB", num_workers=2)
    sd = ld.StreamingDataset(str(out), shuffle=True, seed=seed)
    # In-process (no workers): inside the same memory limit as the others.
    loader = ld.StreamingDataLoader(sd, batch_size=batch, num_workers=0)
    while True:
        for b in loader:
            yield b["row"].numpy()


def _litdata_rows(item):
    f, a, b = item
    z = np.load(f)
    e, m, lg, v = z["exps"], z["moves"], z["legal"], z["ev"]
    for i in range(a, b):
        yield {"row": i, "exponents": e[i], "moves": int(m[i]), "legal": lg[i], "ev_values": v[i]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset")
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--budget-mb", type=int, default=64)
    ap.add_argument("--shard-rows", type=int, default=262_144)
    ap.add_argument("--litdata-batches", type=int, default=20)
    ap.add_argument("--mmap-batches", type=int, default=40,
                    help="batches of the mapped file's pass (it pages from storage: slow)")
    ap.add_argument("--batches", type=int, default=0, help="0: one epoch")
    ap.add_argument("--no-limit", dest="limit", action="store_false",
                    help="do not limit the passes' memory with a cgroup")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    single = ensure_dataset(args)
    sharded = ensure_sharded(single, args.shard_rows)
    work = pathlib.Path(os.environ.get("BENCH_OUT", HERE.parent / "bench-out"))
    m = json.loads((sharded / "manifest.json").read_text())
    n = m["rows"]
    budget = args.budget_mb << 20
    run_of_row = np.load(single / "steps.npy", mmap_mode="r")["run_id"].copy()
    shard_of_row = np.zeros(n, np.uint32)
    for i, s in enumerate(m["shards"]):
        shard_of_row[s["first_row"]:s["first_row"] + s["rows"]] = i
    q = lambda: Quality(run_of_row, shard_of_row)  # noqa: E731

    batches = args.batches or n // args.batch
    slack = 32 << 20
    passes = {
        "shards": ("a2pack ShardStream (block shuffle)", sharded, batches,
                   lambda: shard_stream(sharded, args.batch, budget, 1)),
        "mmap": ("a2pack Dataset(mmap=True), uniform random", single,
                 min(batches, args.mmap_batches), lambda: mmap_random(single, args.batch, 1)),
        "numpy": ("np.load(mmap_mode='r') + fancy index", single,
                  min(batches, args.mmap_batches), lambda: numpy_memmap(single, args.batch, 1)),
    }
    try:
        import litdata  # noqa: F401
        passes["litdata"] = ("LitData StreamingDataset shuffle", work, args.litdata_batches,
                             lambda: litdata_block(single, n, args.batch, 1, work,
                                                   args.shard_rows))
    except ImportError:
        print("litdata not installed: its row is skipped")
    if args.one:
        name, folder, nb, make = passes[args.one]
        r = timed_pass(name, folder, nb, make, q(), limit=budget + slack if args.limit else None)
        print("RESULT " + json.dumps(r))
        return
    uniform = q()
    rng = np.random.default_rng(5)
    for _ in range(batches):
        uniform.add(rng.integers(0, n, size=args.batch))
    load = os.getloadavg()
    print(f"{n} rows ({n * 32 >> 20} MiB) in {len(m['shards'])} shards of <= {args.shard_rows} "
          f"rows; budget {args.budget_mb} MiB; batch {args.batch}; {batches} batches; load "
          f"average {load[0]:.2f}")
    results = []
    for key in passes:
        cmd = [sys.executable, __file__, "--one", key, "--rows", str(args.rows),
               "--batch", str(args.batch), "--batches", str(batches),
               "--budget-mb", str(args.budget_mb), "--shard-rows", str(args.shard_rows),
               "--litdata-batches", str(args.litdata_batches),
               "--mmap-batches", str(args.mmap_batches)]
        if args.dataset:
            cmd += ["--dataset", args.dataset]
        if not args.limit:
            cmd.append("--no-limit")
        p = subprocess.run(cmd, capture_output=True, text=True)
        remove_empty_groups()
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if p.returncode != 0 or not line:
            print(f"{key}: failed (exit {p.returncode}): {p.stderr.strip()[-400:]}")
            continue
        results.append(json.loads(line[0][7:]))
    results.append({"name": "uniform sampling (reference)", "steps_s": float("nan"),
                    "read_per_row": float("nan"), "quality": uniform.row(), "limited": False,
                    "peak": None})
    limited = len(results) > 1 and all(r["limited"] for r in results[:-1])
    print("memory: " + (f"each pass may add {args.budget_mb} MiB + 32 MiB to what it held "
                        "before it opened its reader (cgroup v1)" if limited else "NOT limited (no cgroup): the page cache "
                        "may hold the whole file, flattering the mapped reads"))
    print(f"{'reader':42s} {'M steps/s':>9s} {'read B/row':>10s} {'run share':>9s} "
          f"{'shard share':>11s} {'shards':>6s} {'peak MiB':>8s}")
    for r in results:
        rs, ss, ns = r["quality"]
        peak = f"{r['peak'] / 2**20:8.0f}" if r.get("peak") else f"{'':8s}"
        print(f"{r['name']:42s} {r['steps_s'] / 1e6:9.3f} {r['read_per_row']:10.1f} "
              f"{rs:9.4f} {ss:11.4f} {ns:6.1f} {peak}")
    s = a2pack.ShardStream(sharded, batch_size=args.batch, budget_bytes=budget, seed=1)
    print(f"window: {s.info()['window_shards']} shards per batch pool")

    from results import emit

    byname = {r["name"]: r for r in results}
    ours = byname.get("a2pack ShardStream (block shuffle)")
    mm = byname.get("np.load(mmap_mode='r') + fancy index")
    if not ours or not mm:
        return
    emit("shard_compare", "steps/s at 2x the budget (ShardStream)", ours["steps_s"],
         mm["name"], mm["steps_s"], "steps/s",
         note=f"storage read {ours['read_per_row']:.0f} B/row vs {mm['read_per_row']:.0f}; "
              f"shard share {ours['quality'][1]:.3f} vs uniform {uniform.row()[1]:.3f}")
    ld = byname.get("LitData StreamingDataset shuffle")
    if ld:
        emit("shard_compare", "steps/s at 2x the budget vs LitData", ours["steps_s"], ld["name"],
             ld["steps_s"], "steps/s")


if __name__ == "__main__":
    main()
