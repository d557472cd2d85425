"""a2pack.ray on a local Ray cluster against the CLI doing the same job in
one process, on one machine:

  startup  ray.data.range(1).take_all(): the fixed cost of one Ray Data job.
  pack     read_runs(folder) | write_pack against `a2pack pack -i folder`
           (the files are the same bytes; checked).
  build    read_runs(folder) | write_dataset against `a2pack dataset build
           -i folder` (the same three files with SOURCE_DATE_EPOCH; checked).
  read     read_dataset(ds) iterated in batches of 65536 rows (every
           column) against a2pack.Dataset(ds) loaded and its rows gathered
           into Arrow by the library in the same batches.

Against Ray's own readers and writers of the same data (Ray on both sides,
the same blocks and batches):

  parquet  read_dataset(ds) against ray.data.read_parquet of the same step
           rows and columns (pyarrow's default compression, one row group
           per 65536 rows).
  numpy    read_dataset(ds) against ray.data.read_numpy of the rows as an
           .npy of 32-byte records (uint8 [n, 32]: Ray's reader takes no
           structured dtype).
  bag      read_bag(.bag of the run files) against read_parquet of the same
           records (one binary column, uncompressed: the records are
           compressed run files already).
  write    write_dataset(runs) against write_parquet(runs) of the same
           materialised Ray Dataset of runs (every run column).

Each cell is the whole job, Ray's scheduling included, timed --repeat times
with the sides alternating; the median is reported, and ratio = a2pack.ray
speed / the other's. Against the CLI, on one machine, the CLI is expected to
win: the figure is what the engine costs (tasks, the object store,
staging), which buys spreading the work over a cluster. Rows/s and MB/s
count the stored bytes (32 a step row; the records' bytes for bags).

Every read is split into --blocks read tasks (default: twice the CPUs);
--blocks 0 leaves the count to Ray (200 for inputs of this size: each task
then costs its scheduling, about 10 ms on a small machine).

Usage: python bench/ray_compare.py [--runs 2000] [--repeat 3] [--num-cpus 2]
       [--blocks N] [--cells startup,pack,build,read,parquet,numpy,bag,write]
       [--json FILE]
Needs ray[data] and the a2pack CLI ($A2PACK_CLI or beside the library).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import tempfile
import time
from typing import Any, Callable, Dict, List

import numpy as np


def cli() -> str:
    import a2pack
    env = os.environ.get("A2PACK_CLI")
    return env or str(pathlib.Path(a2pack.library_path).resolve().parent / "a2pack")


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=None)
    ap.add_argument("--cells", default="startup,pack,build,read,parquet,numpy,bag,write")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cells = args.cells.split(",")
    blocks = 2 * args.num_cpus if args.blocks is None else args.blocks
    split = {"override_num_blocks": blocks} if blocks else {}

    try:
        import ray
    except ImportError:
        print("ray_compare: skipped: Ray is not installed (pip install 'a2pack[ray]')")
        return
    import a2pack
    import a2pack.ray as a2ray

    os.environ["SOURCE_DATE_EPOCH"] = "1700000000"
    root = pathlib.Path(tempfile.mkdtemp(prefix="ray-compare-"))
    tool = cli()
    try:
        runs = root / "runs"
        a2pack.generate_dir(runs, args.runs, seed=1, policy="expectimax")
        steps = len(a2pack.load_batch(sorted(runs.glob("*.a2run2"))).moves)
        ray.init(num_cpus=args.num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ray.data.range(1).take_all()  # warm: workers started, modules imported
        results: List[Dict[str, Any]] = []

        def cell(name: str, unit: str, n: int, ours: Callable[[], None],
                 theirs: Callable[[], None], check: Callable[[], None], nbytes: int = 0,
                 other: str = "") -> None:
            a, b = [], []
            for _ in range(args.repeat):
                a.append(timed(ours))
                b.append(timed(theirs))
            check()
            ta, tb = statistics.median(a), statistics.median(b)
            results.append({"cell": name, "unit": unit, "n": n, "a2pack_ray_s": ta,
                            "other_s": tb, "a2pack_ray_per_s": n / ta, "other_per_s": n / tb,
                            "a2pack_ray_mb_s": nbytes / ta / 1e6, "other_mb_s": nbytes / tb / 1e6,
                            "other": other, "ratio": tb / ta})

        def clean(*paths: pathlib.Path) -> None:
            for p in paths:
                if p.is_dir():
                    shutil.rmtree(p)
                elif p.exists():
                    p.unlink()

        if "startup" in cells:
            cell("startup", "jobs", 1, lambda: ray.data.range(1).take_all(), lambda: None,
                 lambda: None)
        if "pack" in cells:
            def ours_pack() -> None:
                clean(root / "ray.a2pack")
                a2ray.write_pack(a2ray.read_runs(runs, **split), root / "ray.a2pack")

            def cli_pack() -> None:
                clean(root / "cli.a2pack")
                subprocess.run([tool, "pack", "-q", "-i", str(runs), "-o",
                                str(root / "cli.a2pack")], check=True)

            def same_pack() -> None:
                assert filecmp.cmp(root / "ray.a2pack", root / "cli.a2pack", shallow=False)
            cell("pack", "runs", args.runs, ours_pack, cli_pack, same_pack)
        ray_reads = {"read", "parquet", "numpy"} & set(cells)
        if "build" in cells or ray_reads:
            subprocess.run([tool, "dataset", "build", "--no-progress", "-i", str(runs), "--out",
                            str(root / "cli_ds")], check=True, capture_output=True)
        if "build" in cells:
            def ours_build() -> None:
                clean(root / "ray_ds")
                a2ray.write_dataset(a2ray.read_runs(runs, **split), root / "ray_ds",
                                    source_input=str(runs), source_kind="dir")

            def cli_build() -> None:
                clean(root / "cli_ds")
                subprocess.run([tool, "dataset", "build", "--no-progress", "-i", str(runs),
                                "--out", str(root / "cli_ds")], check=True, capture_output=True)

            def same_build() -> None:
                for f in ("steps.npy", "metadata.db", "manifest.json"):
                    assert filecmp.cmp(root / "ray_ds" / f, root / "cli_ds" / f, shallow=False)
            cell("build", "runs", args.runs, ours_build, cli_build, same_build)
        if "read" in cells:
            got: Dict[str, int] = {}

            def ours_read() -> None:
                n = 0
                for b in a2ray.read_dataset(root / "cli_ds", verify=False, **split).iter_batches(
                        batch_size=65536, batch_format="pyarrow"):
                    n += b.num_rows
                got["ray"] = n

            def lib_read() -> None:
                import pyarrow as pa
                ds = a2pack.Dataset(root / "cli_ds")
                n = 0
                for s in range(0, len(ds), 65536):
                    idx = np.arange(s, min(s + 65536, len(ds)), dtype=np.int64)
                    n += pa.record_batch(ds.arrow_gather(idx)).num_rows
                got["lib"] = n

            def same_rows() -> None:
                assert got["ray"] == got["lib"] == steps
            cell("read", "rows", steps, ours_read, lib_read, same_rows, 32 * steps)
        seen: Dict[str, int] = {}

        def ray_rows(ds: Any, side: str, batch: int = 65536) -> None:
            """Iterate a Ray Dataset in pyarrow batches; its rows to seen[side]."""
            n = 0
            for b in ds.iter_batches(batch_size=batch, batch_format="pyarrow"):
                n += b.num_rows
            seen[side] = n
        if {"parquet", "numpy"} & set(cells):
            def ours_steps() -> None:
                ray_rows(a2ray.read_dataset(root / "cli_ds", verify=False, **split), "a2pack")

            def same_steps() -> None:
                assert seen["a2pack"] == seen["other"] == steps, seen
        if "parquet" in cells:
            import pyarrow as pa
            import pyarrow.parquet as pq
            lib_ds = a2pack.Dataset(root / "cli_ds")
            table = pa.table(pa.record_batch(lib_ds.arrow_gather(
                np.arange(len(lib_ds), dtype=np.int64))))
            (root / "steps_parquet").mkdir()
            pq.write_table(table, root / "steps_parquet" / "steps.parquet", row_group_size=65536)
            del table, lib_ds
            cell("parquet", "rows", steps, ours_steps,
                 lambda: ray_rows(ray.data.read_parquet(str(root / "steps_parquet"), **split),
                                  "other"), same_steps, 32 * steps, "ray.data.read_parquet")
        if "numpy" in cells:
            (root / "steps_npy").mkdir()
            raw = np.load(root / "cli_ds" / "steps.npy", mmap_mode="r")
            np.save(root / "steps_npy" / "steps.npy", np.ascontiguousarray(raw).view(np.uint8)
                    .reshape(len(raw), 32))
            del raw
            cell("numpy", "rows", steps, ours_steps,
                 lambda: ray_rows(ray.data.read_numpy(str(root / "steps_npy"), **split), "other"),
                 same_steps, 32 * steps, "ray.data.read_numpy")
        if "bag" in cells:
            import pyarrow as pa
            import pyarrow.parquet as pq
            records = [p.read_bytes() for p in sorted(runs.glob("*.a2run2"))]
            nbytes = sum(len(r) for r in records)
            with a2pack.bag.Writer(str(root / "runs.bag")) as w:
                for r in records:
                    w.write(r)
            (root / "records_parquet").mkdir()
            pq.write_table(pa.table({"record": pa.array(records, pa.binary())}),
                           root / "records_parquet" / "records.parquet", compression="none")

            def same_records() -> None:
                assert seen["a2pack"] == seen["other"] == len(records), seen
            cell("bag", "records", len(records),
                 lambda: ray_rows(a2ray.read_bag(str(root / "runs.bag"), **split), "a2pack", 4096),
                 lambda: ray_rows(ray.data.read_parquet(str(root / "records_parquet"), **split),
                                  "other", 4096), same_records, nbytes, "ray.data.read_parquet")
        if "write" in cells:
            made = a2ray.read_runs(runs, **split).materialize()

            def ours_write() -> None:
                clean(root / "w_ds")
                a2ray.write_dataset(made, root / "w_ds")

            def parquet_write() -> None:
                clean(root / "w_parquet")
                made.write_parquet(str(root / "w_parquet"))

            def same_write() -> None:
                assert a2pack.Dataset(root / "w_ds").__len__() == steps
            cell("write", "rows", steps, ours_write, parquet_write, same_write, 32 * steps,
                 "Dataset.write_parquet")
        load = os.getloadavg()
        print(f"{args.runs} runs ({steps} steps), {args.num_cpus} Ray CPUs, "
              f"{blocks or 'Ray default'} blocks, "
              f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print(f"{'cell':<8} {'a2pack.ray':>14} {'other':>14} {'ratio':>7}  "
              f"{'a2pack.ray/s':>14} {'other/s':>14} {'MB/s':>15}  other")
        for r in results:
            if r["cell"] == "startup":
                print(f"{'startup':<8} {r['a2pack_ray_s']:>12.3f} s   (a Ray Data job of one row)")
                continue
            mb = (f"{r['a2pack_ray_mb_s']:>7.0f}/{r['other_mb_s']:<7.0f}"
                  if r["a2pack_ray_mb_s"] else " " * 15)
            print(f"{r['cell']:<8} {r['a2pack_ray_s']:>12.3f} s {r['other_s']:>12.3f} s "
                  f"{r['ratio']:>7.2f}  {r['a2pack_ray_per_s']:>14.0f} {r['other_per_s']:>14.0f} "
                  f"{mb}  {r['other'] or 'the CLI / library'}")
        import sys
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
        from results import emit  # bench/results.py: the summary table of `make bench`
        others = {"pack": "a2pack pack", "build": "a2pack dataset build",
                  "read": "a2pack.Dataset + arrow_gather"}
        for r in results:
            if r["cell"] in others:
                emit("ray", f"{r['cell']}, {r['n']} {r['unit']}, {blocks or 'default'} blocks "
                     "(engine overhead)", r["a2pack_ray_s"], others[r["cell"]], r["other_s"], "s",
                     higher_is_better=False)
            elif r["other"]:
                emit("ray", f"{r['cell']}, {r['n']} {r['unit']}, {blocks or 'default'} blocks",
                     r["a2pack_ray_per_s"], r["other"], r["other_per_s"], f"{r['unit']}/s",
                     target=1.0 if r["cell"] != "write" else None)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"runs": args.runs, "steps": steps, "blocks": blocks, "load": load,
                           "cells": results},
                          f, indent=2)
        ray.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
