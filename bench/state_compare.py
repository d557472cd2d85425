"""Checkpoint cost and grain delivery: a2pack's samplers against the peers.

1. state_dict()/load_state_dict() cost (microseconds, bytes) of
   a2pack's EpochBatchSampler and MixSampler, against torchdata's
   StatefulDataLoader sampler state over torch's RandomSampler (torchdata's
   stateful RandomSampler iterator: its restore replays the permutation up
   to the position) and against grain's iterator get_state/set_state.
2. grain over a2pack (StepSource, one item = one batch of --batch rows, one
   gather) against grain over array_record of the same rows (one record per
   row, grain batching them): delivered steps/s.

Usage: python bench/state_compare.py --dataset DIR [--batch 4096] [--steps 50]
       python bench/state_compare.py --rows 2000000   (builds a synthetic dataset in a temp dir)
"""

import argparse
import os
import pickle
import tempfile
import time

import numpy as np


def timeit(fn, reps):
    fn()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps * 1e6


def state_costs(n, batch, reps):
    from a2pack.torch_data import EpochBatchSampler
    from a2pack.mix import MixSampler
    rows = []
    s = EpochBatchSampler(n, batch_size=batch, seed=1)
    it = iter(s)
    for _ in range(10):
        next(it)
    st = s.state_dict()
    rows.append(("a2pack EpochBatchSampler", timeit(s.state_dict, reps),
                 timeit(lambda: s.load_state_dict(st), reps), len(pickle.dumps(st))))
    m = MixSampler([n // 2, n - n // 2], [0.7, 0.3], batch_size=batch, seed=1)
    it = iter(m)
    for _ in range(10):
        next(it)
    st = m.state_dict()
    rows.append(("a2pack MixSampler (2 sources)", timeit(m.state_dict, reps),
                 timeit(lambda: m.load_state_dict(st), reps), len(pickle.dumps(st))))
    try:
        from torchdata.stateful_dataloader.sampler import RandomSampler, BatchSampler
        bs = BatchSampler(RandomSampler(range(n)), batch, False)
        it = iter(bs)
        for _ in range(10):
            next(it)
        st = it.state_dict()

        def load():
            i2 = iter(BatchSampler(RandomSampler(range(n)), batch, False))
            i2.load_state_dict(st)
            next(i2)  # the restore is applied on the first next()
        rows.append(("torchdata RandomSampler+BatchSampler", timeit(it.state_dict, reps),
                     timeit(load, max(1, reps // 100)), len(pickle.dumps(st))))
    except ImportError:
        pass
    try:
        import grain
        ds = grain.MapDataset.range(n).shuffle(seed=1).batch(batch).to_iter_dataset()
        gi = iter(ds)
        for _ in range(10):
            next(gi)
        st = gi.get_state()

        def gload():
            g2 = iter(ds)
            g2.set_state(st)
        rows.append(("grain MapDataset.shuffle.batch iterator", timeit(gi.get_state, reps),
                     timeit(gload, reps), len(pickle.dumps(st))))
    except ImportError:
        pass
    print(f"\nstate_dict / load_state_dict, {n} rows, batch {batch}")
    print(f"{'':44s} {'save us':>10s} {'load us':>10s} {'bytes':>7s}")
    for name, a, b, nb in rows:
        print(f"{name:44s} {a:10.1f} {b:10.1f} {nb:7d}")


def grain_rates(ds_dir, batch, steps, tmp):
    import grain
    import a2pack
    from a2pack.grain import StepSource
    src = StepSource(ds_dir, batch_size=batch, seed=1, drop_last=True)
    # no prefetch threads on either side: the per-step cost of each source
    ro = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)
    it = iter(grain.MapDataset.source(src).shuffle(seed=2).repeat().to_iter_dataset(ro))
    next(it)
    t = time.perf_counter()
    for _ in range(steps):
        next(it)
    a2 = steps / (time.perf_counter() - t)

    from array_record.python.array_record_module import ArrayRecordWriter
    ds = a2pack.Dataset(ds_dir)
    path = os.path.join(tmp, "rows.array_record")
    w = ArrayRecordWriter(path, "group_size:1")
    raw = ds.steps.view(np.uint8).reshape(-1, 32)
    n_rows = min(len(ds), batch * (steps + 2))
    for i in range(n_rows):
        w.write(raw[i].tobytes())
    w.close()
    ar = grain.sources.ArrayRecordDataSource([path])

    def decode(b):
        rows = np.frombuffer(b"".join(b), dtype=a2pack.dataset.STEP_DTYPE)
        return rows
    # array_record's best path: one item = one batch of row keys read with
    # its batch call (__getitems__), as StepSource reads one batch per item
    perm = np.random.default_rng(1).permutation(n_rows)
    nb = n_rows // batch
    it = iter(grain.MapDataset.range(nb).shuffle(seed=2).repeat()
              .map(lambda i: decode(ar.__getitems__(perm[i * batch:(i + 1) * batch].tolist())))
              .to_iter_dataset(ro))
    next(it)
    ar_steps = max(3, steps // 10)
    t = time.perf_counter()
    for _ in range(ar_steps):
        next(it)
    arr = ar_steps / (time.perf_counter() - t)
    print(f"\ngrain delivery, batch {batch}, {steps} / {ar_steps} steps, one process, no prefetch")
    # A training step is one batch of `batch` rows (dataset steps).
    print(f"grain over a2pack StepSource (batch items):  {a2:8.1f} batches/s "
          f"({a2 * batch / 1e6:6.2f} M rows/s)")
    print(f"grain over array_record (batch __getitems__):   {arr:8.1f} batches/s "
          f"({arr * batch / 1e6:6.2f} M rows/s)")
    print(f"ratio: {a2 / arr:.1f}x")


def synthetic(tmp, rows):
    """A dataset of `rows` random (valid) step rows in runs of 1000."""
    import a2pack
    from a2pack.dataset_rows import RunMeta, write_dataset
    rng = np.random.default_rng(0)
    steps = np.zeros(rows, dtype=a2pack.dataset.STEP_DTYPE)
    steps["board"] = rng.integers(0, 2**63, rows, dtype=np.uint64)
    steps["move"] = rng.integers(0, 4, rows)
    steps["ev_legal"] = 15
    steps["ev_values"][np.arange(rows), steps["move"]] = 1.0
    run_len = 1000
    steps["step_index"] = np.arange(rows) % run_len
    runs = [(RunMeta(len(c), 0, 2, "bench", 0, 0.0), c)
            for c in np.split(steps, np.arange(run_len, rows, run_len))]
    out = os.path.join(tmp, "ds")
    write_dataset(out, runs)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--reps", type=int, default=2000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ds = a.dataset or synthetic(tmp, a.rows)
        import a2pack
        state_costs(len(a2pack.Dataset(ds)), a.batch, a.reps)
        grain_rates(ds, a.batch, a.steps, tmp)


if __name__ == "__main__":
    main()
