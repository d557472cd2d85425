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

Each cell is the whole job, Ray's scheduling included, timed --repeat times
with the sides alternating; the median is reported, and ratio = a2pack.ray
speed / the other's. On one machine the CLI is expected to win: the figure
is what the engine costs (tasks, the object store, staging), which buys
spreading the work over a cluster.

Every read is split into --blocks read tasks (default: twice the CPUs);
--blocks 0 leaves the count to Ray (200 for inputs of this size: each task
then costs its scheduling, about 10 ms on a small machine).

Usage: python bench/ray_compare.py [--runs 2000] [--repeat 3] [--num-cpus 2]
       [--blocks N] [--cells startup,pack,build,read] [--json FILE]
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
    ap.add_argument("--cells", default="startup,pack,build,read")
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
                 theirs: Callable[[], None], check: Callable[[], None]) -> None:
            a, b = [], []
            for _ in range(args.repeat):
                a.append(timed(ours))
                b.append(timed(theirs))
            check()
            ta, tb = statistics.median(a), statistics.median(b)
            results.append({"cell": name, "unit": unit, "n": n, "a2pack_ray_s": ta,
                            "other_s": tb, "a2pack_ray_per_s": n / ta, "other_per_s": n / tb,
                            "ratio": tb / ta})

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
        if "build" in cells or "read" in cells:
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
            cell("read", "rows", steps, ours_read, lib_read, same_rows)
        load = os.getloadavg()
        print(f"{args.runs} runs ({steps} steps), {args.num_cpus} Ray CPUs, "
              f"{blocks or 'Ray default'} blocks, "
              f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print(f"{'cell':<8} {'a2pack.ray':>14} {'other':>14} {'ratio':>7}")
        for r in results:
            if r["cell"] == "startup":
                print(f"{'startup':<8} {r['a2pack_ray_s']:>12.3f} s   (a Ray Data job of one row)")
                continue
            print(f"{r['cell']:<8} {r['a2pack_ray_s']:>12.3f} s {r['other_s']:>12.3f} s "
                  f"{r['ratio']:>7.2f}")
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
