"""a2pack.beam on Apache Beam's DirectRunner (multi_processing, 2 workers),
in one run on one machine:

  startup    a pipeline of one element (Create | Map): the fixed cost every
             cell below includes.
  build      BuildDataset from a folder of run files (rows made by the
             workers, folder assembled once) against `a2pack dataset build
             --workers 2` on the same folder. The CLI is expected to win on
             one machine: the figure is what the engine costs (process
             start, pickling rows between stages, the single assembly).
  bag read   ReadFromBag against bagz.beam.bagzio.ReadFromBagz on the same
             .bagz file, each pipeline counting the records it read.
  bag write  WriteToBag against WriteToBagz of the same records (made on
             the workers from seeds) to <name>@2.bagz.
  direct     the same sources and sinks driven without a runner, in this
             process (source.read over the whole range; sink open, write
             every record, close): the connectors' own cost.

Every cell is a whole pipeline (start-up included), timed --repeat times
with the sides alternating, median reported; ratio = a2pack speed / other.

Records/s are whole-pipeline figures, start-up included; the default of
1 000 000 records (200 MB) makes the records, not the runner's fixed cost
of a few seconds per pipeline, most of each cell's time.

Usage: python bench/beam_compare.py [--runs 3000] [--records 1000000]
       [--record-bytes 200] [--repeat 3] [--cells startup,build,read,write,direct]
       [--json FILE]
Needs apache-beam, bagz and the a2pack CLI ($A2PACK_CLI or beside the library).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

import a2pack
from a2pack import beam as a2beam


def options():
    return PipelineOptions(runner="DirectRunner", direct_running_mode="multi_processing",
                           direct_num_workers=2)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cli() -> str:
    """The CLI built with the very library this process loaded (the outputs
    are compared byte for byte, and a wheel bundles its own SQLite while a
    development build may link the system's, which can lay out the same
    database differently): the package's own, else the one beside the
    library, else $A2PACK_CLI."""
    lib = pathlib.Path(a2pack.library_path).resolve()
    package = pathlib.Path(a2pack.__file__).resolve().parent
    for p in ([package / "_bin" / "a2pack"] if lib.parent == package else []) + [lib.parent / "a2pack"]:
        if p.is_file():
            return str(p)
    env = os.environ.get("A2PACK_CLI")
    if not env or not pathlib.Path(env).exists():
        sys.exit("no a2pack CLI beside the library: set A2PACK_CLI")
    return env


def bench_startup(repeat: int) -> dict:
    """What any pipeline costs on this runner: one element through one Map."""
    def go():
        with beam.Pipeline(options=options()) as p:
            _ = p | beam.Create([1]) | beam.Map(lambda x: x)
    return {"cell": "startup", "s": statistics.median(timed(go) for _ in range(repeat))}


def bench_build(root: pathlib.Path, n_runs: int, repeat: int) -> dict:
    runs = root / "runs"
    a2pack.generate_dir(runs, n_runs, seed=1, policy="greedy")  # greedy records branch values
    rows = len(a2pack.Dataset(_cli_build(runs, root / "probe")))
    shutil.rmtree(root / "probe")
    t_cli, t_beam = [], []
    for k in range(repeat):
        t_cli.append(timed(lambda: _cli_build(runs, root / f"cli{k}")))

        def build():
            with beam.Pipeline(options=options()) as p:
                _ = (p | a2beam.ReadRunFiles(runs)
                     | a2beam.BuildDataset(root / f"beam{k}", source_input=str(runs),
                                           source_kind="dir"))
        t_beam.append(timed(build))
        for f in ("steps.npy", "metadata.db", "manifest.json"):
            assert (root / f"cli{k}" / f).read_bytes() == (root / f"beam{k}" / f).read_bytes(), f
        shutil.rmtree(root / f"cli{k}")
        shutil.rmtree(root / f"beam{k}")
    shutil.rmtree(runs)
    c, b = statistics.median(t_cli), statistics.median(t_beam)
    return {"cell": "build", "runs": n_runs, "rows": rows, "cli_s": c, "beam_s": b,
            "cli_runs_per_s": n_runs / c, "beam_runs_per_s": n_runs / b, "ratio": c / b}


def _cli_build(runs, out):
    subprocess.run([cli(), "dataset", "build", "--input", str(runs), "--out", str(out),
                    "--workers", "2"], check=True, capture_output=True)
    return out


def bench_bag(root: pathlib.Path, n: int, size: int, repeat: int, cells) -> list:
    import bagz
    from bagz.beam import bagzio
    recs = [r for a in range(0, n, 1000) for r in _make_records(a, n, size)]
    path = root / "in.bagz"
    with bagz.Writer(str(path)) as w:
        for r in recs:
            w.write(r)

    def read(transform):
        def go():
            with beam.Pipeline(options=options()) as p:
                _ = p | transform(str(path)) | beam.combiners.Count.Globally()
        return go

    # The records are made on the workers (1000 per element of a small
    # Create) rather than shipped from here: beam.Create of the records
    # themselves would time the pickling of the whole input instead.
    def write(transform, k):
        def go():
            with beam.Pipeline(options=options()) as p:
                _ = (p | beam.Create(range(0, n, 1000))
                     | beam.FlatMap(_make_records, n, size)
                     | transform(str(root / f"w{k}" / "out@2.bagz")))
        return go

    out = []
    if "direct" in cells:
        out += bench_direct(root, path, recs, repeat)
    if "read" in cells:
        t_a, t_b = [], []
        for _ in range(repeat):
            t_a.append(timed(read(a2beam.ReadFromBag)))
            t_b.append(timed(read(bagzio.ReadFromBagz)))
        out.append(_cell("bag read", n, t_a, t_b))
    if "write" not in cells:
        return out
    t_a, t_b = [], []
    for k in range(repeat):
        t_a.append(timed(write(a2beam.WriteToBag, f"a{k}")))
        t_b.append(timed(write(bagzio.WriteToBagz, f"b{k}")))
        assert sorted(a2pack.bag.Reader(str(root / f"wa{k}" / "out@2.bagz"))) == \
            sorted(bagz.Reader(str(root / f"wb{k}" / "out@2.bagz")))
    out.append(_cell("bag write", n, t_a, t_b))
    return out


def bench_direct(root, path, recs, repeat) -> list:
    """The connectors without a runner: a whole source's records through
    source.read(range_tracker) (claims, decoding by the coder), and every
    record through the sink's open / write_encoded_record / close, in this
    process. This is the IO layer's own cost, which the pipeline cells
    above bury under the runner's per-element cost."""
    from bagz.beam import bagzio

    def read(transform):
        src = transform(str(path))._source
        return lambda: sum(1 for _ in src.read(src.get_range_tracker(None, None)))

    def write(transform, name):
        sink = transform(str(root / "d" / "x@2.bagz"))._sink
        def go():
            os.makedirs(root / "d", exist_ok=True)
            w = sink.open(str(root / "d" / f"{name}.bagz"))
            for r in recs:
                sink.write_encoded_record(w, r)
            sink.close(w)
        return go

    out = []
    for cell, a, b in (("direct read", read(a2beam.ReadFromBag), read(bagzio.ReadFromBagz)),
                       ("direct write", write(a2beam.WriteToBag, "a"),
                        write(bagzio.WriteToBagz, "b"))):
        t_a, t_b = [], []
        for _ in range(repeat):
            t_a.append(timed(a))
            t_b.append(timed(b))
        out.append(_cell(cell, len(recs), t_a, t_b))
    return out


def _make_records(start, n, size):
    rng = np.random.default_rng(start)
    block = rng.integers(0, 256, size=(min(1000, n - start), size), dtype=np.uint8)
    return [row.tobytes() for row in block]


def _cell(name, n, t_a, t_b):
    a, b = statistics.median(t_a), statistics.median(t_b)
    return {"cell": name, "records": n, "a2pack_s": a, "bagz_s": b,
            "a2pack_records_per_s": n / a, "bagz_records_per_s": n / b, "ratio": b / a}


def main():
    # The same manifest time stamps for the CLI and BuildDataset, so the build
    # cell can check that the two folders are the same bytes.
    os.environ.setdefault("SOURCE_DATE_EPOCH", "1700000000")
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--record-bytes", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cells", default="startup,build,read,write,direct",
                    help="comma-separated: startup, build, read, write, direct")
    ap.add_argument("--json")
    a = ap.parse_args()
    which = a.cells.split(",")
    root = pathlib.Path(tempfile.mkdtemp(prefix="beam_compare-"))
    # Beam's job server leaves an empty `beam-temp*` folder under the temp
    # dir for every pipeline: keep them in this run's folder.
    (root / "tmp").mkdir()
    tempfile.tempdir = str(root / "tmp")
    try:
        cells = []
        if "startup" in which:
            cells.append(bench_startup(a.repeat))
        if "build" in which:
            cells.append(bench_build(root, a.runs, a.repeat))
        if "read" in which or "write" in which or "direct" in which:
            cells += bench_bag(root, a.records, a.record_bytes, a.repeat, which)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for c in cells:
        if c["cell"] == "startup":
            print(f"startup: a pipeline of one element takes {c['s']:.2f} s")
    from results import emit  # bench/results.py: the summary table of `make bench`
    for b in [c for c in cells if c["cell"] == "build"]:
        emit("beam", f"BuildDataset, {b['runs']} runs (engine overhead)", b["beam_s"], "a2pack dataset build -j 2",
             b["cli_s"], "s", higher_is_better=False)
        print(f"build {b['runs']} runs ({b['rows']} rows): CLI --workers 2 {b['cli_s']:.2f} s, "
              f"BuildDataset (DirectRunner, 2 workers) {b['beam_s']:.2f} s, "
              f"beam/CLI speed {b['ratio']:.2f}x")
    for c in [c for c in cells if c["cell"].startswith(("bag", "direct"))]:
        emit("beam", c["cell"], c["a2pack_records_per_s"], "bagz.beam.bagzio", c["bagz_records_per_s"],
             "records/s", target=1.5)
        print(f"{c['cell']:10s} {c['records']} records: a2pack {c['a2pack_records_per_s']:,.0f}/s, "
              f"bagz {c['bagz_records_per_s']:,.0f}/s, ratio {c['ratio']:.2f}x")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(cells, indent=2))


if __name__ == "__main__":
    main()
