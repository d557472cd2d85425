"""Replay sampling side by side: a2pack's replay orders through the feed
against TorchRL's replay buffer and the numpy recipe users write by hand,
over the same rows in the same run.

Cells, per dataset size (rows of runs of 500-2 500 steps, made by
bench_dataset and reused), each the median time of one batch over --calls
calls:
  - uniform with replacement, 4 096 rows: a2pack Feed(replacement=True);
    TorchRL ReplayBuffer(LazyTensorStorage, RandomSampler); numpy
    steps[rng.integers(0, n, 4096)];
  - windows, 256 x 16 steps of one run: a2pack Feed(window=16,
    replacement=True); TorchRL SliceSampler(num_slices=256, traj_key=run_id);
    numpy starts[rng.integers(...)] + arange(16);
  - prioritized, sample 4 096 rows and update 4 096 priorities: a2pack
    Feed(priority=a2pack.Priorities(...)) + update_priorities; TorchRL
    PrioritizedSampler sample + update_priority;
  - prioritized windows, 256 x 16 steps, sampled and their 256 start
    priorities updated: a2pack Feed(window=16, priority=...); TorchRL
    PrioritizedSliceSampler(num_slices=256, traj_key=run_id);
  - flashbax (JAX on CPU, jitted, the batch ready): its flat buffer's
    uniform sample of 4 096 and its prioritised flat buffer's sample +
    set_priorities of 4 096, in the uniform and prioritized rows;
TorchRL's buffers hold the rows in a LazyTensorStorage, and from 20 M rows
in a LazyMemmapStorage under bench-out (four in-memory copies of 10^8 rows
do not fit this machine); each baseline runs in a forked child, so one
that runs out of memory is reported and skipped. Then
the share of a 2 ms step a2pack's loop waits (consumer_wait_s over the
loop's time). The a2pack time is what the loop receives: next() on a feed
whose producers fill ahead, columns exponents, moves, legal, ev_values.

Usage: python3 bench/replay_compare.py [--rows N ...] [--calls K] [--no-torchrl]
       [--no-flashbax]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import a2pack

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dataset_compare import ensure_dataset  # noqa: E402  (bench/)
from results import emit  # noqa: E402

COLUMNS = ("exponents", "moves", "legal", "ev_values")
BATCH, SLICES, SLICE_LEN = 4096, 256, 16


def times_ms(fn, calls):
    """(median, mean) of `calls` calls after one to warm up, in ms: the
    median is a call's latency, the mean what a loop of them sustains."""
    fn()  # warm
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3, statistics.mean(ts) * 1e3


def median_ms(fn, calls):
    return times_ms(fn, calls)[0]


def a2pack_feed(ds, **kw):
    return a2pack.Feed(ds, columns=COLUMNS, threads=2, depth=4, seed=1, pin="off", **kw)


def feed_ms(ds, calls, **kw):
    with a2pack_feed(ds, **kw) as f:
        return median_ms(lambda: next(f), calls)


def waited_share(ds, step_s=0.002, batches=200, **kw):
    with a2pack_feed(ds, **kw) as f:
        next(f)
        w0 = f.stats()["consumer_wait_s"]
        t = time.perf_counter()
        for _ in range(batches):
            next(f)
            time.sleep(step_s)
        wall = time.perf_counter() - t
        return (f.stats()["consumer_wait_s"] - w0) / wall


def numpy_cells(steps, runs, calls, rng):
    n = len(steps)
    uniform = median_ms(lambda: steps[rng.integers(0, n, BATCH)], calls)
    # Every step a window fits after, as a user precomputes them once.
    starts = np.concatenate([np.arange(f, f + c - SLICE_LEN + 1) for f, c in runs
                             if c >= SLICE_LEN])
    offs = np.arange(SLICE_LEN)

    def windows():
        s = starts[rng.integers(0, len(starts), SLICES)]
        return steps[s[:, None] + offs]
    return uniform, median_ms(windows, calls)


# From this many rows TorchRL's buffers live in a LazyMemmapStorage (files
# under bench-out): four in-memory copies of 10^8 rows do not fit 24 GiB.
MEMMAP_ROWS = 20_000_000


def isolated(fn, *args):
    """A baseline's cells in a forked child (the rows shared copy-on-write),
    so that one which runs out of memory at a size is reported and the other
    cells go on. Forked while no a2pack feed runs (no threads to lose)."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    q = ctx.SimpleQueue()
    p = ctx.Process(target=lambda: q.put(fn(*args)))
    p.start()
    p.join()
    if p.exitcode != 0:
        why = "killed (out of memory?)" if p.exitcode == -9 else f"exit status {p.exitcode}"
        print(f"{fn.__name__} at {len(args[0]):,} rows: its process ended, {why}; cells skipped")
        return {}
    return q.get()


def torchrl_cells(steps, calls):
    import shutil
    import tempfile

    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyMemmapStorage, LazyTensorStorage, ReplayBuffer
    n = len(steps)
    td = TensorDict({"board": torch.from_numpy(steps["board"].view(np.int64)),
                     "move": torch.from_numpy(steps["move"]),
                     "ev_values": torch.from_numpy(np.ascontiguousarray(steps["ev_values"])),
                     "run_id": torch.from_numpy(steps["run_id"].astype(np.int64))},
                    batch_size=[n])

    out_dir = pathlib.Path(os.environ.get("BENCH_OUT", HERE.parent / "bench-out"))
    scratch = tempfile.mkdtemp(prefix="torchrl-memmap-", dir=out_dir) if n >= MEMMAP_ROWS else None

    def buffer(sampler, batch):
        storage = (LazyMemmapStorage(n, scratch_dir=tempfile.mkdtemp(dir=scratch)) if scratch
                   else LazyTensorStorage(n))
        rb = ReplayBuffer(storage=storage, sampler=sampler, batch_size=batch)
        rb.extend(td)
        return rb
    out = {}
    try:
        out.update(torchrl_samplers(buffer, n, calls))
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    return out


def torchrl_samplers(buffer, n, calls):
    import torch
    from torchrl.data.replay_buffers.samplers import (PrioritizedSampler,
                                                      PrioritizedSliceSampler, RandomSampler,
                                                      SliceSampler)
    out = {}
    rb = buffer(RandomSampler(), BATCH)
    out["uniform"] = median_ms(rb.sample, calls)
    del rb  # one buffer at a time
    rb = buffer(SliceSampler(num_slices=SLICES, traj_key="run_id", strict_length=True),
                SLICES * SLICE_LEN)
    out["windows"] = median_ms(rb.sample, calls)
    del rb
    ps = PrioritizedSampler(max_capacity=n, alpha=0.6, beta=0.4)
    rb = buffer(ps, BATCH)
    pri = torch.rand(BATCH) + 0.1

    def sample_update():
        _, info = rb.sample(return_info=True)
        rb.update_priority(info["index"], pri)
    out["prioritized"] = median_ms(sample_update, calls)
    del rb, ps
    rb = buffer(PrioritizedSliceSampler(max_capacity=n, alpha=0.6, beta=0.4, num_slices=SLICES,
                                        traj_key="run_id", strict_length=True),
                SLICES * SLICE_LEN)
    spri = torch.rand(SLICES * SLICE_LEN) + 0.1

    def slice_sample_update():
        _, info = rb.sample(return_info=True)
        rb.update_priority(info["index"], spri)
    out["prioritized windows"] = median_ms(slice_sample_update, calls)
    return out


def flashbax_cells(steps, calls):
    """flashbax's flat buffers over the same rows (JAX on CPU): a uniform
    sample of 4 096, and a prioritised sample + set_priorities of 4 096."""
    import jax
    import jax.numpy as jnp
    import flashbax as fbx
    n = len(steps)
    boards = np.ascontiguousarray(steps["board"]).view(np.uint32).reshape(n, 2)  # no x64 in JAX
    items = {"board": jnp.asarray(boards),
             "move": jnp.asarray(steps["move"]),
             "ev_values": jnp.asarray(np.ascontiguousarray(steps["ev_values"]))}
    first = jax.tree_util.tree_map(lambda x: x[0], items)
    out = {}
    key = [jax.random.PRNGKey(0)]

    def next_key():
        key[0], k = jax.random.split(key[0])
        return k
    flat = fbx.make_flat_buffer(max_length=n, min_length=1, sample_batch_size=BATCH,
                                add_sequences=True)
    state = flat.add(flat.init(first), items)
    sample = jax.jit(flat.sample)
    out["uniform"] = median_ms(
        lambda: jax.block_until_ready(sample(state, next_key()).experience), calls)
    del state
    prio = fbx.make_prioritised_flat_buffer(max_length=n, min_length=1, sample_batch_size=BATCH,
                                            add_sequences=True, priority_exponent=0.6)
    pstate = [prio.add(prio.init(first), items)]
    psample, pset = jax.jit(prio.sample), jax.jit(prio.set_priorities)
    vals = jnp.asarray(np.random.default_rng(1).random(BATCH).astype(np.float32) + 0.1)

    def sample_update():
        b = psample(pstate[0], next_key())
        pstate[0] = jax.block_until_ready(pset(pstate[0], b.indices, vals))
    out["prioritized"] = median_ms(sample_update, calls)
    return out


def runs_of(ds_path):
    ds = a2pack.Dataset(ds_path)
    rid = np.load(pathlib.Path(ds_path) / "steps.npy", mmap_mode="r")["run_id"]
    cut = np.flatnonzero(np.diff(rid)) + 1
    firsts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [len(ds)]])
    return ds, list(zip(firsts.tolist(), (ends - firsts).tolist()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--no-torchrl", action="store_true")
    ap.add_argument("--no-flashbax", action="store_true")
    ap.add_argument("--dataset")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.2f}; median of {args.calls} calls, ms per batch")
    print(f"{'rows':>12} {'cell':>12} {'a2pack':>9} {'numpy':>9} {'torchrl':>9} "
          f"{'x numpy':>8} {'x torchrl':>9} {'waited@2ms':>10}")
    for rows in args.rows:
        path = ensure_dataset(argparse.Namespace(dataset=args.dataset, rows=rows))
        ds, runs = runs_of(path)
        steps = np.load(pathlib.Path(path) / "steps.npy")
        np_uniform, np_windows = numpy_cells(steps, runs, args.calls, rng)
        trl = {} if args.no_torchrl else isolated(torchrl_cells, steps, args.calls)
        fbx = {} if args.no_flashbax else isolated(flashbax_cells, steps, args.calls)
        cells = {
            "uniform": (dict(batch_size=BATCH, replacement=True), np_uniform),
            "windows": (dict(batch_size=SLICES, window=SLICE_LEN, replacement=True), np_windows),
        }
        for cell, (kw, np_ms) in cells.items():
            ms = feed_ms(ds, args.calls, **kw)
            waited = waited_share(ds, **kw)
            t_ms = trl.get(cell)
            print(f"{len(ds):>12} {cell:>12} {ms:>9.3f} {np_ms:>9.3f} "
                  f"{t_ms if t_ms else float('nan'):>9.3f} {np_ms / ms:>8.1f} "
                  f"{(t_ms / ms) if t_ms else float('nan'):>9.1f} {waited:>10.2%}")
            emit("replay", f"{cell} {len(ds):,} rows", ms, "numpy by hand", np_ms, "ms/batch",
                 higher_is_better=False, target=3.0)
            if fbx.get(cell):
                print(f"{'':>12} {'':>12} flashbax {fbx[cell]:.3f} ms: x{fbx[cell] / ms:.1f}")
                emit("replay", f"{cell} {len(ds):,} rows", ms, "flashbax", fbx[cell], "ms/batch",
                     higher_is_better=False)
            if t_ms:
                emit("replay", f"{cell} {len(ds):,} rows", ms, "TorchRL", t_ms, "ms/batch",
                     higher_is_better=False, target=100.0)
        pr = a2pack.Priorities(len(ds), alpha=0.6, beta=0.4)
        vals = (rng.random(BATCH) + 0.1).astype(np.float32)
        with a2pack_feed(ds, batch_size=BATCH, priority=pr) as f:
            def sample_update():
                b = next(f)
                f.update_priorities(b["indices"], vals)
            p_ms, p_mean = times_ms(sample_update, args.calls)
        waited = waited_share(ds, batch_size=BATCH, priority=pr)
        t_ms = trl.get("prioritized")
        print(f"{len(ds):>12} {'prioritized':>12} {p_ms:>9.3f} {'-':>9} "
              f"{t_ms if t_ms else float('nan'):>9.3f} {'-':>8} "
              f"{(t_ms / p_ms) if t_ms else float('nan'):>9.1f} {waited:>10.2%}"
              f"   (sample 4 096 + update 4 096; mean {p_mean:.3f})")
        if t_ms:
            emit("replay", f"prioritized sample+update {len(ds):,} rows", p_ms, "TorchRL", t_ms,
                 "ms/batch", higher_is_better=False, target=30.0)
        if fbx.get("prioritized"):
            f_ms = fbx["prioritized"]
            print(f"{'':>12} {'':>12} flashbax {f_ms:.3f} ms: x{f_ms / p_ms:.1f}")
            emit("replay", f"prioritized sample+update {len(ds):,} rows", p_ms, "flashbax",
                 f_ms, "ms/batch", higher_is_better=False)
        # Windows by priority: 256 windows of 16, their starts' priorities updated.
        wvals = (rng.random(SLICES) + 0.1).astype(np.float32)
        with a2pack_feed(ds, batch_size=SLICES, window=SLICE_LEN, priority=pr) as f:
            def window_sample_update():
                b = next(f)
                f.update_priorities(b["indices"][:, 0], wvals)
            w_ms, w_mean = times_ms(window_sample_update, args.calls)
        waited = waited_share(ds, batch_size=SLICES, window=SLICE_LEN, priority=pr)
        t_ms = trl.get("prioritized windows")
        print(f"{len(ds):>12} {'prio windows':>12} {w_ms:>9.3f} {'-':>9} "
              f"{t_ms if t_ms else float('nan'):>9.3f} {'-':>8} "
              f"{(t_ms / w_ms) if t_ms else float('nan'):>9.1f} {waited:>10.2%}"
              f"   (256 x 16 + update 256 starts; mean {w_mean:.3f})")
        if t_ms:
            emit("replay", f"prioritized windows sample+update {len(ds):,} rows", w_ms, "TorchRL",
                 t_ms, "ms/batch", higher_is_better=False, target=30.0)
        del steps


if __name__ == "__main__":
    main()
