"""From the dataset into a training loop: a2pack's Feed against the loaders
training code uses today, with the training step simulated.

Every loader delivers the same rows - 4 096-row batches of one seeded
permutation of the dataset - as the four columns a policy network trains on
(exponents uint8 [B,16], moves int64 [B], legal bool [B,4], ev_values float32
[B,4]) in torch tensors. The "training step" is a wait of 0, 0.5 or 2 ms
(time.sleep: the accelerator's time, during which the CPU is free). For each
loader and step the script reports the steps (rows) delivered per second and
the fraction of the wall time the loop spent waiting for its next batch.

Loaders:
  feed d=D t=T      a2pack.Feed, depth D (0 = gathered inside next()), T producer threads
  StepBatches DL w  the README's former recipe: StepBatches + EpochBatchSampler in a
                    torch DataLoader with w workers
  numpy DL w        the numpy recipe: np.load + fancy index + numpy unpack, with w
                    DataLoader workers (0: in the loop)
  torch index_select  the rows as torch tensors in RAM, index_select per batch
  grain             grain's MapDataset over the same rows in RAM, batched, with its
                    prefetch (when grain is installed)
  litdata           LitData's StreamingDataset/StreamingDataLoader over the same rows
                    (optimize()d into its chunks; when litdata is installed)
  spdl              Meta's SPDL thread pipeline: the batches' indices as its source, a
                    gather of the same rows in RAM (numpy) as a stage of 2 concurrent
                    tasks on 2 threads, in order, 4 batches buffered (when spdl is
                    installed)

Each cell is the median of --repeat passes (default 3), each with a fresh
loader: on a shared VM one stall of the host (a millisecond, now and then)
is 0.5 % of a 300-batch pass at 0.5 ms steps, more than the feed's own
handoff. Loaders whose first pass takes over 20 s (grain, LitData) run once.

Usage: python3 bench/loader_compare.py [--dataset DIR] [--rows N] [--batches K] [--repeat R]
With no --dataset, a synthetic dataset of N rows (default 4 M) is made by
bench_dataset (as in dataset_compare.py) and reused.
"""

import argparse
import os
import pathlib
import resource
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import a2pack
import a2pack.torch_data

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dataset_compare import ensure_dataset  # noqa: E402  (bench/)

COLUMNS = ("exponents", "moves", "legal", "ev_values")
STEPS_MS = (0.0, 0.5, 2.0)


def run_loop(batches, n_batches, step_s):
    """Consume n_batches from the iterator `batches`, sleeping step_s after
    each; returns (rows/s, waited fraction, rows)."""
    it = iter(batches)
    waited = 0.0
    rows = 0
    t0 = time.perf_counter()
    for _ in range(n_batches):
        a = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:
            break
        waited += time.perf_counter() - a
        rows += int(b["moves"].shape[0])
        if step_s:
            time.sleep(step_s)
    wall = time.perf_counter() - t0
    return rows / wall, waited / wall, rows


# ---------------------------------------------------------------- loaders
def feed_batches(path, batch, depth, threads, seed):
    ds = a2pack.Dataset(path)
    # Torch tensors viewing the ring slot, made once per slot by the feed.
    # The feed itself is the iterator (next() and close()), as a training
    # loop's `for b in feed` uses it.
    return a2pack.Feed(ds, batch_size=batch, depth=depth, threads=threads, columns=COLUMNS,
                       moves_dtype="int64", seed=seed, tensors="torch")


def step_batches_dl(path, batch, workers, seed):
    from a2pack.torch_data import make_loader

    loader, sampler = make_loader(path, batch_size=batch, seed=seed, num_workers=workers,
                                  persistent_workers=workers > 0)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


class NumpyRecipe:
    """The numpy recipe: np.load, then steps[idx] and a numpy unpack."""

    def __init__(self, path):
        self.path = str(path)
        self.steps = None

    def __len__(self):
        return 1 << 40

    def __getitem__(self, idx):
        import torch

        if self.steps is None:
            self.steps = np.load(f"{self.path}/steps.npy", mmap_mode="r")
        rows = self.steps[idx]
        boards = rows["board"]
        shifts = np.arange(60, -4, -4, dtype=np.uint64)
        exps = ((boards[:, None] >> shifts) & np.uint64(0xF)).astype(np.uint8)
        legal = ((rows["ev_legal"][:, None] >> np.arange(4, dtype=np.uint8)) & 1).astype(bool)
        return {"exponents": torch.from_numpy(exps),
                "moves": torch.from_numpy(rows["move"].astype(np.int64)),
                "legal": torch.from_numpy(legal),
                "ev_values": torch.from_numpy(np.ascontiguousarray(rows["ev_values"]))}


def numpy_recipe(path, n, batch, workers, seed):
    import torch.utils.data

    sampler = a2pack.torch_data.EpochBatchSampler(n, batch_size=batch, seed=seed)
    data = NumpyRecipe(path)
    if workers == 0:
        data.steps = np.load(f"{path}/steps.npy")  # in RAM, as np.load gives it
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            for idx in sampler:
                yield data[idx]
            epoch += 1
    loader = torch.utils.data.DataLoader(data, sampler=sampler, batch_size=None,
                                         num_workers=workers, persistent_workers=True)
    while True:
        yield from loader


def torch_index_select(path, n, batch, seed):
    import torch

    ds = a2pack.Dataset(path)
    all_idx = np.arange(n, dtype=np.int64)
    exps, moves, legal, ev = ds.get_batch_columns(all_idx)
    t = {"exponents": torch.from_numpy(exps), "moves": torch.from_numpy(moves.astype(np.int64)),
         "legal": torch.from_numpy(legal), "ev_values": torch.from_numpy(ev)}
    del ds
    sampler = a2pack.torch_data.EpochBatchSampler(n, batch_size=batch, seed=seed)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        for idx in sampler:
            i = torch.from_numpy(idx)
            yield {k: v.index_select(0, i) for k, v in t.items()}
        epoch += 1


def grain_batches(path, n, batch, seed):
    import grain
    import torch

    ds = a2pack.Dataset(path)
    exps, moves, legal, ev = ds.get_batch_columns(np.arange(n, dtype=np.int64))
    moves = moves.astype(np.int64)

    class Rows:  # grain's RandomAccessDataSource protocol over the rows in RAM
        def __len__(self):
            return n

        def __getitem__(self, i):
            return {"exponents": exps[i], "moves": moves[i], "legal": legal[i], "ev_values": ev[i]}

    pipe = (grain.MapDataset.source(Rows()).shuffle(seed=seed).repeat().batch(batch)
            .to_iter_dataset(grain.ReadOptions(num_threads=2, prefetch_buffer_size=4)))
    for b in pipe:
        yield {k: torch.from_numpy(v) for k, v in b.items()}


def epoch_indices(n, batch, seed):
    """The batches' indices, epoch after epoch (the permutation every loader reads)."""
    sampler = a2pack.torch_data.EpochBatchSampler(n, batch_size=batch, seed=seed)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from sampler
        epoch += 1


def spdl_batches(path, n, batch, seed):
    import torch
    from spdl.pipeline import PipelineBuilder

    ds = a2pack.Dataset(path)
    exps, moves, legal, ev = ds.get_batch_columns(np.arange(n, dtype=np.int64))
    moves = moves.astype(np.int64)
    del ds

    def gather(idx):
        return {"exponents": torch.from_numpy(exps[idx]), "moves": torch.from_numpy(moves[idx]),
                "legal": torch.from_numpy(legal[idx]), "ev_values": torch.from_numpy(ev[idx])}

    pipeline = (PipelineBuilder()
                .add_source(epoch_indices(n, batch, seed))
                .pipe(gather, concurrency=2, output_order="input")
                .add_sink(4)
                .build(num_threads=2))
    with pipeline.auto_stop():
        yield from pipeline


def litdata_batches(path, n, batch, seed, work):
    import litdata as ld
    import torch

    out = pathlib.Path(work) / f"litdata-{n}"
    if not (out / "index.json").exists():
        ds = a2pack.Dataset(path)
        exps, moves, legal, ev = ds.get_batch_columns(np.arange(n, dtype=np.int64))
        np.savez(out.with_suffix(".npz"), exps=exps, moves=moves, legal=legal, ev=ev)
        ld.optimize(fn=_litdata_rows, inputs=[(str(out.with_suffix(".npz")), a, min(n, a + 65536))
                                               for a in range(0, n, 65536)],
                    output_dir=str(out), chunk_bytes="64MB", num_workers=2)
    sd = ld.StreamingDataset(str(out), shuffle=True, seed=seed)
    loader = ld.StreamingDataLoader(sd, batch_size=batch, num_workers=2)
    while True:
        for b in loader:
            yield {"exponents": b["exponents"], "moves": b["moves"].long(),
                   "legal": b["legal"], "ev_values": b["ev_values"]}


def _litdata_rows(item):
    f, a, b = item
    z = np.load(f)
    e, m, l, v = z["exps"], z["moves"], z["legal"], z["ev"]  # each z[...] reads the archive
    for i in range(a, b):
        yield {"exponents": e[i], "moves": int(m[i]), "legal": l[i], "ev_values": v[i]}


# ---------------------------------------------------------------- main
def bare_gather(path, batch, rounds=300):
    ds = a2pack.Dataset(path)
    rng = np.random.default_rng(0)
    idx = [rng.integers(0, len(ds), size=batch, dtype=np.int64) for _ in range(64)]
    cols = ds.get_batch_columns(idx[0])
    t = time.perf_counter()
    for k in range(rounds):
        ds.get_batch_columns(idx[k % 64], out=cols)
    return rounds * batch / (time.perf_counter() - t)


def rss_bytes():
    """This process's resident memory now (not its peak)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def feed_memory(path, batch, epochs=3):
    """What a feed adds to the process's resident memory while it serves
    `epochs` epochs (depth 4, 2 threads), against its ring and what the
    stored permutations would take (the index shuffle, the default, keeps
    none; shuffle="stored" up to three: the previous one while its last
    batches are filled, the current one, the next one made ahead; 4 bytes a
    row each)."""
    ds = a2pack.Dataset(path)
    before = rss_bytes()
    feed = a2pack.Feed(ds, batch_size=batch, depth=4, threads=2, columns=COLUMNS,
                       moves_dtype="int64", seed=1, tensors="torch")
    st = feed.stats()
    peak = 0
    for i, b in enumerate(feed):
        if i % 64 == 0:
            peak = max(peak, rss_bytes() - before)
        if b.epoch >= epochs:
            break
    grown = rss_bytes() - before
    feed.close()
    ring = st["slots"] * st["slot_bytes"]
    return grown, max(peak, grown), ring, 3 * 4 * len(ds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset")
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--batches", type=int, default=400, help="batches per cell")
    ap.add_argument("--repeat", type=int, default=3, help="passes per cell (the median is shown)")
    ap.add_argument("--only", help="comma-separated loader name prefixes to run")
    args = ap.parse_args()
    path = ensure_dataset(args)
    n = len(a2pack.Dataset(path, mmap=True, verify=False))
    work = pathlib.Path(os.environ.get("BENCH_OUT", HERE.parent / "bench-out"))
    import torch  # noqa: F401  (imported once up front, outside every timing)

    loaders = {}
    for depth in (0, 2, 4):
        for threads in (1, 2):
            if depth == 0 and threads == 2:
                continue
            loaders[f"feed d={depth} t={threads}"] = (
                lambda d=depth, t=threads: feed_batches(path, args.batch, d, t, 1))
    loaders["StepBatches DL 0"] = lambda: step_batches_dl(path, args.batch, 0, 1)
    loaders["StepBatches DL 2"] = lambda: step_batches_dl(path, args.batch, 2, 1)
    loaders["numpy DL 0"] = lambda: numpy_recipe(path, n, args.batch, 0, 1)
    loaders["numpy DL 2"] = lambda: numpy_recipe(path, n, args.batch, 2, 1)
    loaders["torch index_select"] = lambda: torch_index_select(path, n, args.batch, 1)
    try:
        import grain  # noqa: F401
        loaders["grain"] = lambda: grain_batches(path, n, args.batch, 1)
    except ImportError:
        print("grain not installed: its cells are skipped")
    try:
        import spdl.pipeline  # noqa: F401
        loaders["spdl"] = lambda: spdl_batches(path, n, args.batch, 1)
    except ImportError:
        print("spdl not installed: its cells are skipped")
    try:
        import litdata  # noqa: F401
        loaders["litdata"] = lambda: litdata_batches(path, n, args.batch, 1, work)
    except ImportError:
        print("litdata not installed: its cells are skipped")
    if args.only:
        keep = tuple(args.only.split(","))
        loaders = {k: v for k, v in loaders.items() if k.startswith(keep)}

    bare = bare_gather(path, args.batch)
    load = os.getloadavg()
    print(f"dataset {path}: {n} rows; batch {args.batch}; {args.batches} batches per cell; "
          f"load average {load[0]:.2f}")
    print(f"bare in-process gather (get_batch_columns, 1 worker): {bare / 1e6:.1f} M steps/s")
    print(f"median of {args.repeat} passes per cell (1 for loaders slower than 20 s a pass)")
    print(f"{'loader':22s} " + " ".join(f"{f'{s} ms: M steps/s  waited':>26s}" for s in STEPS_MS))
    table = {}
    for name, make in loaders.items():
        cells = []
        for step_ms in STEPS_MS:
            passes = []
            while len(passes) < args.repeat:
                gen = make()
                next(gen)  # start-up (workers, threads, first fills) outside the timing
                for _ in range(8):
                    next(gen)
                t0 = time.perf_counter()
                rate, waited, _ = run_loop(gen, args.batches, step_ms / 1000)
                gen.close()
                passes.append((rate, waited))
                if time.perf_counter() - t0 > 20:
                    break
            cells.append((statistics.median(p[0] for p in passes),
                          statistics.median(p[1] for p in passes)))
        table[name] = cells
        print(f"{name:22s} " + " ".join(f"{r / 1e6:15.2f} {w * 100:9.1f}%" for r, w in cells),
              flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {rss:.0f} MB")
    if any(k.startswith("feed") for k in loaders):
        grown, peak, ring, perms = feed_memory(path, args.batch)
        print(f"feed (depth 4, 2 threads) over 3 epochs: resident memory grew {grown / 2**20:.1f} MiB "
              f"(at most {peak / 2**20:.1f} MiB); its ring is {ring / 2**20:.1f} MiB (stored epoch "
              f"permutations would take up to {perms / 2**20:.1f} MiB)")

    from results import emit

    peers = {k: v for k, v in table.items() if not k.startswith("feed")}
    feeds = {k: v for k, v in table.items() if k.startswith("feed")}
    if not feeds:
        return
    for si, step_ms in enumerate(STEPS_MS):
        best_feed = max(feeds, key=lambda k: feeds[k][si][0])
        rate, waited = feeds[best_feed][si]
        if peers:
            best_peer = max(peers, key=lambda k: peers[k][si][0])
            emit("loader_compare", f"{step_ms} ms step: steps/s ({best_feed})", rate, best_peer,
                 peers[best_peer][si][0], "steps/s", target=3.0 if step_ms == 0 else None,
                 note=f"waited {waited * 100:.1f}% of wall (peer {peers[best_peer][si][1] * 100:.1f}%)",
                 bound=bare if step_ms == 0 else None, bound_name="bare in-process gather")
    print("summary cells written to results.jsonl")


if __name__ == "__main__":
    main()
