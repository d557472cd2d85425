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
Beside the cells, per size: the memory the priorities hold (bytes a row),
and a checkpoint: a2pack's Priorities.save / load (the .npy) and the
prioritized feed's state_dict() (pickled) against TorchRL's
PrioritizedSampler.dumps / loads (its sum and min trees), times and bytes.
Once, over a dataset of --append-base rows growing by appends of runs of
250 steps: rows appended per second with a2pack.append_runs (each a
committed, fsynced append to the folder) alone and while a live
prioritized feed samples and updates on another thread (the batches it
served meanwhile beside it), against TorchRL's ReplayBuffer.extend (in
memory) with a prioritized sample and update after each extend.
TorchRL's buffers hold the rows in a LazyTensorStorage, and from 20 M rows
in a LazyMemmapStorage under bench-out (four in-memory copies of 10^8 rows
do not fit this machine); each baseline runs in a forked child, so one
that runs out of memory is reported and skipped. The a2pack time is what
a training loop receives: next() (and the update, where the cell has one)
timed in a loop with a 2 ms step between calls, in which the producers fill
ahead, columns exponents, moves, legal, ev_values; with it the share of the
loop's time next() waited (consumer_wait_s over the loop's time) and, in
column b2b, the median back to back (no step: what the producers sustain).
The peers sample on the caller's thread, so a step between calls does not
change their time.

Usage: python3 bench/replay_compare.py [--rows N ...] [--calls K] [--no-torchrl]
       [--no-flashbax] [--append-base N] [--append-rows N] [--appends K]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import pickle
import shutil
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

import a2pack

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from append_compare import RUN_STEPS, build_base, synthetic_rows  # noqa: E402  (bench/)
from dataset_compare import ensure_dataset  # noqa: E402
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


STEP_S = 0.002  # a learner's step between batches


def in_loop_ms(feed, take, calls, step_s=STEP_S):
    """What a training loop receives: `take` (next(), and an update of the
    priorities where the cell has one) timed with a step of `step_s`
    between calls, in which the producers fill ahead. (median ms, mean ms,
    the share of the loop's time next() waited for the producers), over at
    least 200 steps."""
    take()
    time.sleep(step_s)  # the first batch in, the ring filling
    w0 = feed.stats()["consumer_wait_s"]
    ts = []
    t0 = time.perf_counter()
    for _ in range(max(calls, 200)):
        t = time.perf_counter()
        take()
        ts.append(time.perf_counter() - t)
        time.sleep(step_s)
    waited = (feed.stats()["consumer_wait_s"] - w0) / (time.perf_counter() - t0)
    return statistics.median(ts) * 1e3, statistics.mean(ts) * 1e3, waited


def feed_cell(ds, calls, take=None, **kw):
    """The cell through one feed: in a loop of 2 ms steps (in_loop_ms),
    then back to back (no step: what the producers sustain, median ms)."""
    with a2pack_feed(ds, **kw) as f:
        fn = (lambda: next(f)) if take is None else (lambda: take(f))
        median, mean, waited = in_loop_ms(f, fn, calls)
        back_to_back = median_ms(fn, calls)
    return median, mean, waited, back_to_back


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


def bench_out():
    d = pathlib.Path(os.environ.get("BENCH_OUT", HERE.parent / "bench-out"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def a2pack_checkpoint(ds, pr):
    """Priorities.save / load of the .npy and a prioritized feed's
    state_dict(), pickled, and its load into a new feed: ms and bytes."""
    out = {}
    with tempfile.TemporaryDirectory(dir=bench_out()) as d:
        path = pathlib.Path(d) / "priorities.npy"
        t = time.perf_counter()
        pr.save(path)
        out["save"] = (time.perf_counter() - t) * 1e3
        out["bytes"] = path.stat().st_size
        t = time.perf_counter()
        a2pack.Priorities.load(path, alpha=0.6, beta=0.4, rows=len(ds))
        out["load"] = (time.perf_counter() - t) * 1e3
    with a2pack_feed(ds, batch_size=BATCH, priority=pr) as f:
        for _ in range(3):
            next(f)
        t = time.perf_counter()
        state = pickle.dumps(f.state_dict())
        out["state save"] = (time.perf_counter() - t) * 1e3
        out["state bytes"] = len(state)
    with a2pack_feed(ds, batch_size=BATCH, priority=pr) as f:
        t = time.perf_counter()
        f.load_state_dict(pickle.loads(state))
        out["state load"] = (time.perf_counter() - t) * 1e3
    return out


def run_chunks(rng, chunks, rows):
    """`chunks` lists of RunV2 objects of RUN_STEPS steps, `rows` rows each."""
    from a2pack.run import Meta
    out = []
    for c in range(chunks):
        rows_of = synthetic_rows(rows, rng)
        runs = []
        for i, a in enumerate(range(0, rows, RUN_STEPS)):
            k = min(RUN_STEPS, rows - a)
            r = rows_of[a:a + k]
            meta = Meta(steps=k, start_unix_s=1_800_000_000 + c * 100_000 + i, elapsed_s=1.0,
                        max_score=1000 + i, highest_tile=2048, engine_str="bench")
            col = {f: np.ascontiguousarray(r[f]) for f in ("board", "move", "ev_values", "ev_legal")}
            runs.append(a2pack.RunV2.from_arrays(meta, col["board"], col["move"],
                                                 col["ev_values"], col["ev_legal"], final_board=0))
        out.append(runs)
    return out


def a2pack_append(base_rows, chunks, rows):
    """Rows appended per second (median over the appends) with
    append_runs alone, then while a live prioritized feed samples and
    updates on another thread; and that feed's batches per second."""
    half = len(chunks) // 2
    with tempfile.TemporaryDirectory(dir=bench_out()) as d:
        path = pathlib.Path(d) / "ds"
        build_base(path, base_rows, np.random.default_rng(5))
        alone = []
        for runs in chunks[:half]:
            t = time.perf_counter()
            a2pack.append_runs(path, runs)
            alone.append(rows / (time.perf_counter() - t))
        ds = a2pack.Dataset(path, mmap=True)
        pr = a2pack.Priorities(len(ds), alpha=0.6, beta=0.4)
        vals = np.full(BATCH, 0.5, np.float32)
        stop = threading.Event()
        served = [0]
        with a2pack_feed(ds, batch_size=BATCH, priority=pr, live=True) as f:
            def learner():
                while not stop.is_set():
                    b = next(f)
                    f.update_priorities(b["indices"], vals)
                    served[0] += 1
            th = threading.Thread(target=learner)
            th.start()
            sampling = []
            t0 = time.perf_counter()
            try:
                for runs in chunks[half:]:
                    t = time.perf_counter()
                    a2pack.append_runs(path, runs)
                    sampling.append(rows / (time.perf_counter() - t))
            finally:
                stop.set()
                th.join()
            wall = time.perf_counter() - t0
            seen = f.refresh()
    return {"alone": statistics.median(alone), "sampling": statistics.median(sampling),
            "batches/s": served[0] / wall, "rows seen": seen}


def torchrl_append(base_rows, rows, appends):
    """ReplayBuffer.extend rows per second (median), each extend followed
    by a prioritized sample and update of 4 096, over a LazyTensorStorage
    holding every row."""
    import torch
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.data.replay_buffers.samplers import PrioritizedSampler
    cap = base_rows + rows * appends
    rb = ReplayBuffer(storage=LazyTensorStorage(cap),
                      sampler=PrioritizedSampler(max_capacity=cap, alpha=0.6, beta=0.4),
                      batch_size=BATCH)
    rb.extend(tensordict_of(synthetic_rows(base_rows, np.random.default_rng(5))))
    tds = [tensordict_of(synthetic_rows(rows, np.random.default_rng(6 + i))) for i in range(appends)]
    pri = torch.full((BATCH,), 0.5)
    rates = []
    for td in tds:
        t = time.perf_counter()
        rb.extend(td)
        rates.append(rows / (time.perf_counter() - t))
        _, info = rb.sample(return_info=True)
        rb.update_priority(info["index"], pri)
    return {"extend": statistics.median(rates)}


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
        size = args[0] if isinstance(args[0], int) else len(args[0])
        print(f"{fn.__name__} at {size:,} rows: its process ended, {why}; cells skipped")
        return {}
    return q.get()


def tensordict_of(rows, run_id=False):
    """Rows as TorchRL stores them: board, move, ev_values (and run_id, the
    slice samplers' trajectory key)."""
    import torch
    from tensordict import TensorDict
    cols = {"board": torch.from_numpy(rows["board"].view(np.int64)),
            "move": torch.from_numpy(rows["move"]),
            "ev_values": torch.from_numpy(np.ascontiguousarray(rows["ev_values"]))}
    if run_id:
        cols["run_id"] = torch.from_numpy(rows["run_id"].astype(np.int64))
    return TensorDict(cols, batch_size=[len(rows)])


def torchrl_cells(steps, calls):
    from torchrl.data import LazyMemmapStorage, LazyTensorStorage, ReplayBuffer
    n = len(steps)
    td = tensordict_of(steps, run_id=True)

    scratch = tempfile.mkdtemp(prefix="torchrl-memmap-", dir=bench_out()) if n >= MEMMAP_ROWS else None

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
    # Its checkpoint: the sampler's state (sum and min trees) to a folder.
    with tempfile.TemporaryDirectory(dir=bench_out()) as d:
        t = time.perf_counter()
        ps.dumps(d)
        out["checkpoint save"] = (time.perf_counter() - t) * 1e3
        out["checkpoint bytes"] = sum(f.stat().st_size for f in pathlib.Path(d).rglob("*")
                                      if f.is_file())
        back = PrioritizedSampler(max_capacity=n, alpha=0.6, beta=0.4)
        t = time.perf_counter()
        back.loads(d)
        out["checkpoint load"] = (time.perf_counter() - t) * 1e3
        del back
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
    ap.add_argument("--append-base", type=int, default=1_000_000,
                    help="rows of the dataset the appends grow (0: no append cells)")
    ap.add_argument("--append-rows", type=int, default=50_000, help="rows an append adds")
    ap.add_argument("--appends", type=int, default=16)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.2f}; ms per batch: a2pack's next() in a loop of "
          f"{STEP_S * 1e3:g} ms steps (median, and back to back), the peers' median of "
          f"{args.calls} calls")
    print(f"{'rows':>12} {'cell':>12} {'a2pack':>9} {'b2b':>9} {'numpy':>9} {'torchrl':>9} "
          f"{'x numpy':>8} {'x torchrl':>9} {'waited@2ms':>10}")
    for rows in args.rows:
        path = ensure_dataset(argparse.Namespace(dataset=args.dataset, rows=rows))
        ds, runs = runs_of(path)
        steps = np.load(pathlib.Path(path) / "steps.npy")
        pr = a2pack.Priorities(len(ds), alpha=0.6, beta=0.4)
        vals = (rng.random(BATCH) + 0.1).astype(np.float32)
        wvals = (rng.random(SLICES) + 0.1).astype(np.float32)

        def sample_update(f):
            b = next(f)
            f.update_priorities(b["indices"], vals)

        def window_sample_update(f):  # windows by priority: their starts' priorities updated
            b = next(f)
            f.update_priorities(b["indices"][:, 0], wvals)

        cells = {
            "uniform": (dict(batch_size=BATCH, replacement=True), None, 100.0, ""),
            "windows": (dict(batch_size=SLICES, window=SLICE_LEN, replacement=True), None,
                        100.0, ""),
            "prioritized": (dict(batch_size=BATCH, priority=pr), sample_update, 30.0,
                            "sample 4 096 + update 4 096"),
            "prioritized windows": (dict(batch_size=SLICES, window=SLICE_LEN, priority=pr),
                                    window_sample_update, 30.0,
                                    "256 x 16 + update 256 starts"),
        }
        # a2pack first: after the baselines' children (gigabytes of copies at
        # 10^8 rows) the kernel takes seconds to reclaim their memory, and a
        # loop timed meanwhile measures that.
        ours = {cell: feed_cell(ds, args.calls, take, **kw)
                for cell, (kw, take, _, _) in cells.items()}
        np_uniform, np_windows = numpy_cells(steps, runs, args.calls, rng)
        numpy_ms = {"uniform": np_uniform, "windows": np_windows}
        trl = {} if args.no_torchrl else isolated(torchrl_cells, steps, args.calls)
        fbx = {} if args.no_flashbax else isolated(flashbax_cells, steps, args.calls)
        for cell, (kw, take, target, what) in cells.items():
            ms, mean, waited, b2b = ours[cell]
            np_ms = numpy_ms.get(cell)
            t_ms = trl.get(cell)
            nan = float("nan")
            print(f"{len(ds):>12} {cell[:12]:>12} {ms:>9.3f} {b2b:>9.3f} "
                  f"{np_ms if np_ms else nan:>9.3f} {t_ms if t_ms else nan:>9.3f} "
                  f"{(np_ms / ms) if np_ms else nan:>8.1f} {(t_ms / ms) if t_ms else nan:>9.1f} "
                  f"{waited:>10.2%}   (mean {mean:.3f}{'; ' + what if what else ''})")
            label = f"{cell}{' sample+update' if take else ''} {len(ds):,} rows"
            note = f"next() in a loop of 2 ms steps; back to back {b2b:.3f} ms"
            if np_ms:
                emit("replay", label, ms, "numpy by hand", np_ms, "ms/batch",
                     higher_is_better=False, target=3.0, note=note)
            if t_ms:
                emit("replay", label, ms, "TorchRL", t_ms, "ms/batch", higher_is_better=False,
                     target=target, note=note)
            if fbx.get(cell):
                print(f"{'':>12} {'':>12} flashbax {fbx[cell]:.3f} ms: x{fbx[cell] / ms:.1f}")
                emit("replay", label, ms, "flashbax", fbx[cell], "ms/batch",
                     higher_is_better=False, note=note)
        # The random priorities the cells' updates gave every row they drew
        # are in pr: its file and tree are those of a learner's.
        print(f"{len(ds):>12} priorities hold {pr.nbytes / len(ds):.2f} bytes a row "
              f"({pr.nbytes / 2**20:.1f} MiB)")
        emit("replay", f"priorities memory {len(ds):,} rows", pr.nbytes / len(ds), "", None,
             "bytes/row", higher_is_better=False, note="values and sum tree")
        ck = a2pack_checkpoint(ds, pr)
        line = (f"{len(ds):>12} checkpoint: priorities save {ck['save']:.1f} ms, load "
                f"{ck['load']:.1f} ms, {ck['bytes'] / 2**20:.1f} MiB; feed state_dict "
                f"{ck['state bytes']:,} B, {ck['state save']:.2f} ms, load {ck['state load']:.2f} ms")
        if trl.get("checkpoint save") is not None:
            line += (f"; TorchRL PrioritizedSampler dumps {trl['checkpoint save']:.1f} ms, loads "
                     f"{trl['checkpoint load']:.1f} ms, {trl['checkpoint bytes'] / 2**20:.1f} MiB")
            emit("replay", f"checkpoint save {len(ds):,} rows", ck["save"], "TorchRL",
                 trl["checkpoint save"], "ms", higher_is_better=False,
                 note="Priorities.save against PrioritizedSampler.dumps")
            emit("replay", f"checkpoint load {len(ds):,} rows", ck["load"], "TorchRL",
                 trl["checkpoint load"], "ms", higher_is_better=False,
                 note="Priorities.load against PrioritizedSampler.loads")
        print(line)
        del steps
    if args.append_base:
        chunks = run_chunks(rng, args.appends, args.append_rows)
        ours = a2pack_append(args.append_base, chunks, args.append_rows)
        del chunks
        trl = ({} if args.no_torchrl else
               isolated(torchrl_append, args.append_base, args.append_rows, args.appends))
        line = (f"appends of {args.append_rows:,} rows to {args.append_base:,}: a2pack "
                f"append_runs {ours['alone'] / 1e6:.2f} M rows/s alone, "
                f"{ours['sampling'] / 1e6:.2f} M rows/s while a live prioritized feed served "
                f"{ours['batches/s']:.0f} batches/s (it saw {ours['rows seen']:,} rows)")
        if trl:
            line += f"; TorchRL extend {trl['extend'] / 1e6:.2f} M rows/s (in memory)"
            emit("replay", "append while sampling", ours["sampling"] / 1e6, "TorchRL extend",
                 trl["extend"] / 1e6, "M rows/s",
                 note=f"committed appends of {args.append_rows:,} rows, a live feed sampling")
        print(line)


if __name__ == "__main__":
    main()
