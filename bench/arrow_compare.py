"""Arrow and Parquet export against the obvious ways to do the same thing.

  1. gather of 4096 random dataset rows into a pyarrow Table:
     Dataset.arrow_gather (one copy in the library)  vs  numpy gather
     (Dataset.get_batch) + column building + pa.Table.from_arrays
  2. dataset -> Parquet: Dataset.to_parquet  vs  pyarrow writing the same
     numpy columns (pq.write_table of a table built from Dataset.steps)
  3. pack -> Parquet (steps): PackReader.to_parquet  vs  `a2pack pack
     to-jsonl` + DuckDB read_json ... COPY TO parquet

Each cell is the best of --repeat runs; ratios are baseline time / a2pack
time in the same process. Usage:

  python bench/arrow_compare.py [--runs 1000] [--repeat 5] [--cli build/a2pack]
"""

import argparse
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import a2pack


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def numpy_table(rows):
    """The same columns as the library's export, built with numpy + pyarrow."""
    boards = rows["board"]
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    exps = ((boards[:, None] >> shifts) & np.uint64(15)).astype(np.uint8)
    n = len(rows)
    return pa.Table.from_arrays([
        pa.array(boards),
        pa.FixedSizeListArray.from_arrays(pa.array(exps.reshape(-1)), 16),
        pa.array(rows["move"]),
        pa.array(rows["ev_legal"]),
        pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(rows["ev_values"]).reshape(-1)), 4),
        pa.array(rows["run_id"]),
        pa.array(rows["step_index"]),
    ], names=["board", "exponents", "move", "legal_mask", "ev_values", "run_id", "step_index"]) \
        if n else None


def same(a, b):
    """Equal values column by column (field nullability aside: the library's
    columns are declared non-nullable, numpy-built ones are nullable)."""
    return a.column_names == b.column_names and all(
        a.column(n).to_pylist() == b.column(n).to_pylist() for n in a.column_names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cli", default=os.environ.get("A2PACK_CLI", "build/a2pack"))
    args = ap.parse_args()
    import duckdb

    work = tempfile.mkdtemp(prefix="a2pack-arrow-bench-")
    try:
        a2pack.generate_dir(f"{work}/runs", args.runs, seed=1, policy="greedy")
        a2pack.pack_dir(f"{work}/runs", f"{work}/p.a2pack")
        a2pack.build_dataset(f"{work}/p.a2pack", f"{work}/ds")
        ds = a2pack.Dataset(f"{work}/ds")
        pack = a2pack.PackReader(f"{work}/p.a2pack")
        print(f"{args.runs} runs, {len(ds)} steps; best of {args.repeat}")
        results = []

        rng = np.random.default_rng(0)
        idx = rng.integers(0, len(ds), 4096)
        ours = best(lambda: pa.record_batch(ds.arrow_gather(idx)), args.repeat * 20)
        base = best(lambda: numpy_table(ds.get_batch(idx)), args.repeat * 20)
        assert same(pa.table(ds.arrow_gather(idx)), numpy_table(ds.get_batch(idx)))
        results.append(("gather 4096 rows -> Table", ours, "numpy gather + from_arrays", base))

        out1, out2 = f"{work}/a.parquet", f"{work}/b.parquet"
        ours = best(lambda: ds.to_parquet(out1), args.repeat)
        base = best(lambda: pq.write_table(numpy_table(ds.steps), out2, compression="zstd",
                                           row_group_size=1 << 20), args.repeat)
        assert same(pq.read_table(out1), pq.read_table(out2))
        results.append(("dataset -> Parquet", ours, "pyarrow on numpy columns", base))

        jsonl = f"{work}/steps.jsonl"

        def via_duckdb():
            subprocess.run([args.cli, "to-jsonl", "-q", "--packfile", f"{work}/p.a2pack", "-o",
                            jsonl, "--steps"], check=True, capture_output=True)
            duckdb.sql(f"COPY (SELECT * FROM read_json('{jsonl}')) TO '{out2}' "
                       "(FORMAT parquet, COMPRESSION zstd)")
        ours = best(lambda: pack.to_parquet(out1, "steps"), args.repeat)
        base = best(via_duckdb, args.repeat)
        assert pq.read_metadata(out1).num_rows == pq.read_metadata(out2).num_rows
        results.append(("pack -> Parquet (steps)", ours, "to-jsonl + DuckDB read_json", base))

        from results import emit  # bench/results.py: the summary table of `make bench`

        print(f"{'cell':28} {'a2pack':>10} {'baseline':>10} {'ratio':>7}  baseline")
        for name, o, b_name, b in results:
            print(f"{name:28} {o * 1e3:8.2f}ms {b * 1e3:8.2f}ms {b / o:6.2f}x  {b_name}")
            emit("arrow_compare", name, o, b_name, b, "s", higher_is_better=False,
                 note=f"{args.runs} runs, {len(ds)} steps, best of {args.repeat}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
