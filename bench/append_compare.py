"""What an append to a large dataset costs: a2pack's in-place append against
its copying append (the rename path, `--copy`), upstream ai-2048's
`dataset append`, and writing the new rows alone (`dataset build` of the
same runs into an empty folder).

One run: a base dataset of --rows rows (runs of 250 steps, written with
a2pack.dataset_rows.write_dataset), then appends of each size in --appends
(folders of .a2run2 files) through each tool in turn, all to the same
growing dataset; each append runs as its own process, timed wall to wall,
and its bytes written are the kernel's count for that process
(getrusage(RUSAGE_CHILDREN).ru_oublock: 512-byte blocks it dirtied,
whether or not they reached the disk yet). Caches are warm for all.

Usage: python bench/append_compare.py [--rows 100000000] [--appends 100000,1000000]
           [--dir DIR] [--upstream PATH-TO-upstream's-dataset-binary]
Upstream's binary is found by --upstream or $A2PACK_UPSTREAM_DATASET (built
from the fetched upstream repository with `cargo build --release --bin
dataset`); without it, its cells are skipped.
"""

import argparse
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from results import emit  # noqa: E402

RUN_STEPS = 250


def cli() -> str:
    env = os.environ.get("A2PACK_CLI")
    if env:
        return env
    import a2pack
    return str(pathlib.Path(a2pack.library_path).resolve().parent / "a2pack")


def synthetic_rows(n, rng):
    from a2pack.dataset import STEP_DTYPE
    rows = np.zeros(n, dtype=STEP_DTYPE)
    rows["board"] = rng.integers(0, 2**63, size=n, dtype=np.uint64)
    moves = rng.integers(0, 4, size=n, dtype=np.uint8)
    rows["move"] = moves
    rows["ev_legal"] = (1 << moves).astype(np.uint8) | rng.integers(0, 16, size=n, dtype=np.uint8)
    rows["ev_values"] = rng.random((n, 4), dtype=np.float32)
    rows["step_index"] = np.tile(np.arange(RUN_STEPS, dtype=np.uint16), n // RUN_STEPS + 1)[:n]
    return rows


def build_base(path, n, rng):
    from a2pack.dataset_rows import RunMeta, write_dataset
    rows = synthetic_rows(n, rng)
    runs = []
    for i, a in enumerate(range(0, n, RUN_STEPS)):
        k = min(RUN_STEPS, n - a)
        runs.append((RunMeta(k, 1000 + i, 2048, "bench", 1_700_000_000 + i, 1.0), rows[a:a + k]))
    write_dataset(path, runs)


def write_run_folder(folder, n, rng):
    import a2pack
    from a2pack.run import Meta
    folder.mkdir(parents=True)
    for i, a in enumerate(range(0, n, RUN_STEPS)):
        k = min(RUN_STEPS, n - a)
        meta = Meta(steps=k, start_unix_s=1_800_000_000 + i, elapsed_s=1.0, max_score=1000 + i,
                    highest_tile=2048, engine_str="bench")
        moves = rng.integers(0, 4, size=k, dtype=np.uint8)
        legal = (1 << moves).astype(np.uint8) | rng.integers(0, 16, size=k, dtype=np.uint8)
        run = a2pack.RunV2.from_arrays(meta, rng.integers(0, 2**63, size=k, dtype=np.uint64), moves,
                                       rng.random((k, 4), dtype=np.float32), legal, final_board=0)
        run.save(folder / f"run-{i:06d}.a2run2")


def timed(cmd):
    """Wall seconds and bytes written (the child's dirtied blocks) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_oublock
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}): {p.stderr[-2000:]}")
    written = (resource.getrusage(resource.RUSAGE_CHILDREN).ru_oublock - before) * 512
    return wall, written


def header_rows(steps):
    with open(steps, "rb") as f:
        np.lib.format.read_magic(f)
        shape, _, _ = np.lib.format.read_array_header_1_0(f)
    return shape[0]


def fmt_bytes(b):
    for unit in ("B", "KB", "MB", "GB"):
        if b < 1000 or unit == "GB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--appends", default="100000,1000000")
    ap.add_argument("--dir", help="work folder (default: a temporary one, removed after)")
    ap.add_argument("--upstream", default=os.environ.get("A2PACK_UPSTREAM_DATASET"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.appends.split(",")]
    work = pathlib.Path(args.dir or tempfile.mkdtemp(prefix="a2pack-append-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    a2 = cli()
    try:
        t = time.perf_counter()
        build_base(work / "ds", args.rows, rng)
        print(f"base: {args.rows:,} rows ({fmt_bytes(32 * args.rows)}) written in "
              f"{time.perf_counter() - t:.1f} s")
        for k in sizes:
            write_run_folder(work / f"new-{k}", k, rng)

        results = {}  # (tool, k) -> (wall, bytes, base rows)
        for k in sizes:  # the new rows alone, into an empty folder
            results[("alone", k)] = timed([a2, "dataset", "build", "-i", work / f"new-{k}",
                                           "-o", work / f"alone-{k}", "-q"]) + (0,)
        tools = [("in-place", []), ("copy", ["--copy"])]
        for tool, extra in tools:
            for k in sizes:
                base = header_rows(work / "ds" / "steps.npy")
                wall, written = timed([a2, "dataset", "append", "-d", work / "ds",
                                       "-i", work / f"new-{k}", "-q", "--json"] + extra)
                results[(tool, k)] = (wall, written, base)
        if args.upstream and pathlib.Path(args.upstream).exists():
            for k in sizes:
                base = header_rows(work / "ds" / "steps.npy")
                wall, written = timed([args.upstream, "append", "--dataset", work / "ds",
                                       "--input", work / f"new-{k}"])
                results[("upstream", k)] = (wall, written, base)
                assert header_rows(work / "ds" / "steps.npy") == base + k
        else:
            print("upstream's dataset binary not given (--upstream / $A2PACK_UPSTREAM_DATASET): "
                  "its cells are skipped")

        load = os.getloadavg()
        print(f"\nappend to a {args.rows / 1e6:.0f} M-row dataset (load average "
              f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs)")
        print(f"{'tool':<34}{'new rows':>10}{'base rows':>14}{'wall s':>9}{'written':>11}"
              f"{'new rows/s':>13}")
        names = {"alone": "new rows alone (dataset build)", "in-place": "a2pack append (in place)",
                 "copy": "a2pack append --copy", "upstream": "upstream dataset append"}
        for tool in ("alone", "in-place", "copy", "upstream"):
            for k in sizes:
                if (tool, k) not in results:
                    continue
                wall, written, base = results[(tool, k)]
                print(f"{names[tool]:<34}{k:>10,}{base:>14,}{wall:>9.2f}{fmt_bytes(written):>11}"
                      f"{k / wall / 1e6:>11.2f} M")
        print("written: bytes each process dirtied (getrusage ru_oublock x 512); "
              "the new rows alone are 32 B each")

        big = f"{args.rows / 1e6:.0f} M"
        for k in sizes:
            ip = results[("in-place", k)]
            cell = f"append {k / 1e3:.0f} K rows to {big}"
            emit("append", f"{cell}: wall", ip[0], "a2pack --copy", results[("copy", k)][0], "s",
                 higher_is_better=False, target=20)
            emit("append", f"{cell}: bytes written", ip[1], "a2pack --copy",
                 results[("copy", k)][1], "B", higher_is_better=False)
            if ("upstream", k) in results:
                emit("append", f"{cell}: wall vs upstream", ip[0], "upstream dataset append",
                     results[("upstream", k)][0], "s", higher_is_better=False)
            emit("append", f"{cell}: wall vs the new rows alone", ip[0],
                 "dataset build of the new rows", results[("alone", k)][0], "s",
                 higher_is_better=False, target=0.5)
        out = pathlib.Path(os.environ.get("BENCH_OUT", pathlib.Path(__file__).resolve().parents[1]
                                          / "bench-out"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "append_compare.json").write_text(json.dumps(
            {f"{t}/{k}": {"wall_s": v[0], "bytes_written": v[1], "base_rows": v[2]}
             for (t, k), v in results.items()} | {"load": load}, indent=2))
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
