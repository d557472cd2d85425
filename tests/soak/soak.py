#!/usr/bin/env python3
"""Soak test (`make soak`, not part of `make test`).

For --seconds (default 180), at the same time:

* --readers processes read the pack (raw entries and decoded runs), the
  `.bagz` and `.bag` record files and the dataset in random batches,
  checking every byte against what was written at setup, and that the
  dataset only ever grows by whole runs (rows never change, run/step
  transitions stay consistent, counts never go down);
* one process appends run batches to the dataset with the CLI
  (`a2pack dataset append`), one batch after another;
* one process logs with `a2pack.DataLogger`, flushing at random points and
  recording each completed flush in a progress file (fsync'ed);
* every --kill-min..--kill-max seconds one of the two writers is SIGKILLed
  and restarted (a new logger incarnation reopens the same folder).

At the end: every reader saw only consistent data, every flushed log record
is present and exact (each incarnation an unbroken prefix), no segment is
missing, `a2pack dataset verify` passes and the rows are consistent. The
figures (operations, kills, errors) are printed as JSON; the exit status is
non-zero on any inconsistency or unexpected error.

Usage: soak.py --cli build/a2pack [--seconds 180] [--readers 3] [--seed 1]
Runs with the installed `a2pack` package (or A2PACK_LIBRARY + PYTHONPATH).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.abspath(__file__)


# ---------------------------------------------------------------- helpers
def bag_record(i: int) -> bytes:
    """Record i of the soak's record files: deterministic, 0 to ~3 KB."""
    h = hashlib.sha256(i.to_bytes(8, "little")).digest()
    return (h * (1 + h[0] % 100))[: (i * 37) % 3000]


def log_record(seq: int):
    """Record `seq` of a logger incarnation: exact at value_scale 0.5."""
    n = seq % 7
    idx = np.arange(n, dtype=np.uint32) * 3 + np.uint32(seq % 11)
    val = (np.arange(n, dtype=np.float64) - 3.0) * 0.5 + seq * 0.5
    return idx, val


def run_cli(cli, *args, timeout=600):
    return subprocess.run([cli, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def check_transitions(rows: np.ndarray, what: str):
    """Consecutive rows: the same run with the next step, or a new run's step 0."""
    rid = rows["run_id"].astype(np.int64)
    step = rows["step_index"].astype(np.int64)
    same = (rid[1:] == rid[:-1]) & (step[1:] == step[:-1] + 1)
    new = (rid[1:] != rid[:-1]) & (step[1:] == 0)
    bad = np.nonzero(~(same | new))[0]
    if bad.size:
        k = int(bad[0])
        raise AssertionError(
            f"{what}: rows {k}->{k + 1} go from run {rid[k]} step {step[k]} to run "
            f"{rid[k + 1]} step {step[k + 1]}")


# ---------------------------------------------------------------- roles
def role_reader(work: str, seconds: float, seed: int, out: str) -> int:
    import a2pack
    from a2pack import bag

    rng = random.Random(seed)
    with open(os.path.join(work, "expected.json")) as f:
        exp = json.load(f)
    initial = np.load(os.path.join(work, "initial_rows.npy"))
    ops = {"pack_read": 0, "pack_decode": 0, "bagz": 0, "bag": 0, "dataset": 0}
    records = {"pack": 0, "bag": 0, "dataset_rows": 0}
    errors = []
    inconsistent = []
    last_rows, last_runs = 0, 0
    deadline = time.time() + seconds
    pack_path = os.path.join(work, "soak.a2pack")
    n_bag = exp["bag_records"]
    while time.time() < deadline:
        op = rng.choice(["pack_read", "pack_decode", "bagz", "bag", "dataset", "dataset"])
        try:
            if op in ("pack_read", "pack_decode"):
                with a2pack.PackReader(pack_path) as pr:
                    n = len(pr)
                    idx = [rng.randrange(n) for _ in range(rng.randint(1, 32))]
                    if op == "pack_read":
                        for i in idx:
                            if hashlib.sha256(pr.read(i)).hexdigest() != exp["pack_sha"][i]:
                                inconsistent.append(f"pack entry {i}: bytes differ")
                    else:
                        for i, run in zip(idx, pr.decode_batch(idx)):
                            if len(run) != exp["pack_steps"][i]:
                                inconsistent.append(f"pack entry {i}: {len(run)} steps")
                    records["pack"] += len(idx)
            elif op in ("bagz", "bag"):
                r = bag.Reader(os.path.join(work, f"soak.{op}"))
                if len(r) != n_bag:
                    inconsistent.append(f"{op}: {len(r)} records, wrote {n_bag}")
                idx = [rng.randrange(n_bag) for _ in range(rng.randint(1, 64))]
                for i, rec in zip(idx, r.read_indices(idx)):
                    if rec != bag_record(i):
                        inconsistent.append(f"{op} record {i} differs")
                records["bag"] += len(idx)
            else:
                ds = a2pack.Dataset(os.path.join(work, "dataset"))
                try:
                    rows, runs = len(ds), ds.num_runs
                    if rows < last_rows or runs < last_runs:
                        inconsistent.append(f"dataset shrank: {last_rows}/{last_runs} rows/runs "
                                            f"then {rows}/{runs}")
                    last_rows, last_runs = rows, runs
                    a = rng.randrange(rows)
                    b = min(rows, a + rng.randint(2, 512))
                    got = ds.get_batch(np.arange(a, b))
                    check_transitions(got, f"dataset rows {a}..{b}")
                    if a < len(initial):
                        e = min(b, len(initial))
                        if got[: e - a].tobytes() != initial[a:e].tobytes():
                            inconsistent.append(f"dataset rows {a}..{e} changed since setup")
                    if got[-1]["step_index"] == 0 and b == rows and rows > 1:
                        inconsistent.append("dataset ends with a run's step 0 only: torn run?")
                    ids = ds.run_ids()
                    if len(ids) != runs:
                        inconsistent.append(f"dataset: {len(ids)} run ids, {runs} runs")
                    records["dataset_rows"] += b - a
                finally:
                    ds.close()
            ops[op] += 1
        except AssertionError as e:
            inconsistent.append(str(e))
        except Exception as e:  # noqa: BLE001 - every failure is a finding
            errors.append(f"{op}: {type(e).__name__}: {e}")
    with open(out, "w") as f:
        json.dump({"ops": ops, "records": records, "errors": errors,
                   "inconsistent": inconsistent}, f)
    return 0


def role_logger(log_dir: str, incarnation: int, progress: str, seed: int) -> int:
    import a2pack

    rng = random.Random(seed)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("now", True))
    with a2pack.DataLogger(log_dir, frame_bytes=4096, rotate_bytes=64 << 10,
                           flush_interval_ms=5) as log:
        sid = log.register_stream({"incarnation": incarnation}, epoch_scale=1.0,
                                  value_scale=0.5)
        fd = os.open(progress, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        seq = 0
        next_flush = rng.randint(1, 400)
        while not stop["now"]:
            for _ in range(50):
                idx, val = log_record(seq)
                log.record(sid, float(seq), idx, val)
                seq += 1
                if seq == next_flush:
                    log.flush()
                    os.write(fd, f"{incarnation} {sid} {seq}\n".encode())
                    os.fsync(fd)
                    next_flush = seq + rng.randint(1, 400)
            time.sleep(0.002)
        log.flush()
        os.write(fd, f"{incarnation} {sid} {seq}\n".encode())
        os.fsync(fd)
        os.close(fd)
    return 0


# ---------------------------------------------------------------- setup
def setup(cli: str, work: str, seed: int, n_batches: int):
    import a2pack
    from a2pack import bag

    runs = os.path.join(work, "runs-all")
    r = run_cli(cli, "gen", "-n", 30 + 4 * n_batches, "-o", runs, "-s", seed,
                "--depth", 1, "--max-steps", 150, "-j", 1)
    if r.returncode:
        raise RuntimeError(f"gen failed: {r.stderr}")
    files = sorted(os.listdir(runs))
    # The initial dataset from the first 30 runs; batches of 4 for appends.
    os.makedirs(os.path.join(work, "runs-initial"))
    for name in files[:30]:
        shutil.copy(os.path.join(runs, name), os.path.join(work, "runs-initial", name))
    batches = []
    for b in range(n_batches):
        d = os.path.join(work, f"batch-{b:04}")
        os.makedirs(d)
        for name in files[30 + 4 * b: 34 + 4 * b]:
            shutil.copy(os.path.join(runs, name), os.path.join(d, name))
        batches.append(d)
    r = run_cli(cli, "pack", "--input", runs, "--output", os.path.join(work, "soak.a2pack"),
                "-q")
    if r.returncode:
        raise RuntimeError(f"pack failed: {r.stderr}")
    r = run_cli(cli, "dataset", "build", "-i", os.path.join(work, "runs-initial"),
                "--out", os.path.join(work, "dataset"))
    if r.returncode:
        raise RuntimeError(f"dataset build failed: {r.stderr}")
    n_bag = 3000
    for ext in ("bagz", "bag"):
        with bag.Writer(os.path.join(work, f"soak.{ext}")) as w:
            for i in range(n_bag):
                w.write(bag_record(i))
    with a2pack.PackReader(os.path.join(work, "soak.a2pack")) as pr:
        pack_sha = [hashlib.sha256(pr.read(i)).hexdigest() for i in range(len(pr))]
        pack_steps = [len(pr.decode(i)) for i in range(len(pr))]
    with a2pack.Dataset(os.path.join(work, "dataset")) as ds:
        np.save(os.path.join(work, "initial_rows.npy"), np.array(ds.steps))
        initial_runs = ds.num_runs
    with open(os.path.join(work, "expected.json"), "w") as f:
        json.dump({"pack_sha": pack_sha, "pack_steps": pack_steps, "bag_records": n_bag}, f)
    return batches, initial_runs


# ---------------------------------------------------------------- checks
def check_log(log_dir: str, progress: str):
    from a2pack import logger
    import warnings

    flushed = {}  # sid -> highest flushed seq count
    with open(progress) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                _, sid, n = map(int, parts)
                flushed[sid] = max(flushed.get(sid, 0), n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = logger.decode(log_dir)
    bad = []
    kinds = {"torn tails": 0, "notes": 0, "other": 0}
    for p in data.problems:
        if p.note:
            kinds["notes"] += 1
        elif "truncated frame" in p.message or "trailing bytes" in p.message:
            kinds["torn tails"] += 1
        else:
            kinds["other"] += 1
            bad.append(f"log problem: {p}")
    by_sid = {}
    for r in range(len(data)):
        by_sid.setdefault(int(data.stream_ids[r]), []).append(r)
    lost = 0
    for sid, n in flushed.items():
        rows = by_sid.get(sid, [])
        seqs = [int(data.epochs[r]) for r in rows]
        if seqs != list(range(len(seqs))):
            bad.append(f"log stream {sid}: epochs are not 0..{len(seqs) - 1} in order")
        if len(seqs) < n:
            lost += n - len(seqs)
            bad.append(f"log stream {sid}: {n} records flushed, {len(seqs)} decoded")
        for r, seq in zip(rows, seqs):
            idx, val = log_record(seq)
            a, b = int(data.offsets[r]), int(data.offsets[r + 1])
            if not (np.array_equal(data.indices[a:b], idx) and np.array_equal(data.values[a:b], val)):
                bad.append(f"log stream {sid} record {seq} differs")
                break
    return {"records_decoded": len(data), "streams": len(data.streams),
            "records_flushed": sum(flushed.values()), "flushed_records_lost": lost,
            "segments": data.summary["segments"], "problems": kinds}, bad


def check_dataset(cli: str, ds_dir: str, runs_lo: int, runs_hi: int):
    import a2pack

    bad = []
    r = run_cli(cli, "dataset", "verify", "-d", ds_dir)
    if r.returncode:
        bad.append(f"dataset verify failed (rc {r.returncode}): {r.stderr.strip()[-500:]}")
    with a2pack.Dataset(ds_dir) as ds:
        try:
            check_transitions(np.array(ds.steps), "final dataset")
        except AssertionError as e:
            bad.append(str(e))
        runs = ds.num_runs
        if not runs_lo <= runs <= runs_hi:
            bad.append(f"dataset has {runs} runs, expected {runs_lo}..{runs_hi}")
        rows = len(ds)
    leftovers = [n for n in os.listdir(ds_dir) if "tmp" in n or n.endswith(".journal")]
    return {"runs": runs, "rows": rows, "verify_rc": r.returncode,
            "leftover_files": leftovers}, bad


# ---------------------------------------------------------------- controller
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("role", nargs="?", default="main")
    ap.add_argument("--cli", default=os.environ.get("A2PACK_CLI", "build/a2pack"))
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--readers", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kill-min", type=float, default=1.0)
    ap.add_argument("--kill-max", type=float, default=4.0)
    ap.add_argument("--work", default="")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--out", default="")
    ap.add_argument("--log-dir", default="")
    ap.add_argument("--progress", default="")
    ap.add_argument("--incarnation", type=int, default=0)
    a = ap.parse_args()
    if a.role == "reader":
        return role_reader(a.work, a.seconds, a.seed, a.out)
    if a.role == "logger":
        return role_logger(a.log_dir, a.incarnation, a.progress, a.seed)

    cli = os.path.abspath(a.cli)
    work = a.work or tempfile.mkdtemp(prefix="a2pack-soak-")
    os.makedirs(work, exist_ok=True)
    rng = random.Random(a.seed)
    t0 = time.time()
    n_batches = max(20, int(a.seconds / 2))
    batches, initial_runs = setup(cli, work, a.seed, n_batches)
    setup_s = time.time() - t0
    print(f"soak: setup in {setup_s:.1f}s in {work}; running {a.seconds:.0f}s", file=sys.stderr,
          flush=True)

    me = [sys.executable, HERE]
    readers = [subprocess.Popen(me + ["reader", "--work", work, "--seconds", str(a.seconds),
                                      "--seed", str(a.seed * 100 + k),
                                      "--out", os.path.join(work, f"reader-{k}.json")])
               for k in range(a.readers)]
    log_dir, progress = os.path.join(work, "log"), os.path.join(work, "log-progress.txt")
    ds_dir = os.path.join(work, "dataset")
    figures = {"appends_ok": 0, "appends_killed": 0, "appends_refused_locked": 0,
               "locked_sample": "", "appends_failed": 0, "append_errors": [],
               "logger_incarnations": 0, "logger_kills": 0, "logger_failed": 0,
               "logger_errors": [], "kills": 0}
    runs_lo = runs_hi = initial_runs
    logger_p = appender = None
    batch_i = 0
    inc = 0
    deadline = t0 + setup_s + a.seconds
    next_kill = time.time() + rng.uniform(a.kill_min, a.kill_max)

    def start_logger():
        nonlocal inc
        inc += 1
        figures["logger_incarnations"] += 1
        return subprocess.Popen(me + ["logger", "--log-dir", log_dir, "--progress", progress,
                                      "--incarnation", str(inc), "--seed", str(a.seed * 7 + inc)],
                                stderr=subprocess.PIPE, text=True)

    def start_append():
        nonlocal batch_i
        p = subprocess.Popen([cli, "dataset", "append", "-d", ds_dir, "-i",
                              batches[batch_i % len(batches)], "-j", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        p.runs = len(os.listdir(batches[batch_i % len(batches)]))
        p.killed = False
        batch_i += 1
        return p

    def reap_append(p):
        nonlocal runs_lo, runs_hi
        err = p.stderr.read()
        if p.killed:
            figures["appends_killed"] += 1
            runs_hi += p.runs  # may or may not have committed
        elif p.returncode == 0:
            figures["appends_ok"] += 1
            runs_lo += p.runs
            runs_hi += p.runs
        elif "locked" in err:
            # An append refused because readers were loading (a lock timeout).
            figures["appends_refused_locked"] += 1
            if not figures["locked_sample"]:
                figures["locked_sample"] = err.strip()[-300:]
        else:
            figures["appends_failed"] += 1
            if len(figures["append_errors"]) < 20:
                figures["append_errors"].append(err.strip()[-300:])

    while time.time() < deadline:
        if logger_p is None or logger_p.poll() is not None:
            if logger_p is not None and not getattr(logger_p, "killed", False):
                figures["logger_failed"] += 1
                figures["logger_errors"].append(logger_p.stderr.read().strip()[-300:])
            logger_p = start_logger()
        if appender is None or appender.poll() is not None:
            if appender is not None:
                reap_append(appender)
            appender = start_append()
        if time.time() >= next_kill:
            victim = rng.choice(["logger", "appender"])
            p = logger_p if victim == "logger" else appender
            if p.poll() is None:
                p.kill()
                p.wait()
                p.killed = True
                figures["kills"] += 1
                if victim == "logger":
                    figures["logger_kills"] += 1
            next_kill = time.time() + rng.uniform(a.kill_min, a.kill_max)
        time.sleep(0.02)

    # Wind down: the logger closes on SIGTERM (a final flush), the current
    # append finishes, then one more append so an interrupted one is recovered.
    logger_p.send_signal(signal.SIGTERM)
    try:
        logger_p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        logger_p.kill()
        logger_p.wait()
        figures["logger_errors"].append("did not close within 60 s of SIGTERM")
    appender.wait(timeout=600)
    reap_append(appender)
    for p in readers:
        p.wait(timeout=a.seconds + 600)
    final = start_append()
    final.wait(timeout=600)
    reap_append(final)

    totals = {"ops": {}, "records": {}}
    bad, reader_errors = [], []
    for k in range(a.readers):
        with open(os.path.join(work, f"reader-{k}.json")) as f:
            rep = json.load(f)
        for key in ("ops", "records"):
            for op, n in rep[key].items():
                totals[key][op] = totals[key].get(op, 0) + n
        reader_errors += rep["errors"]
        bad += rep["inconsistent"]
    log_fig, log_bad = check_log(log_dir, progress)
    ds_fig, ds_bad = check_dataset(cli, ds_dir, runs_lo, runs_hi)
    bad += log_bad + ds_bad
    report = {
        "seconds": a.seconds, "readers": a.readers, "reader_ops": totals["ops"],
        "reader_records": totals["records"],
        "reader_errors": len(reader_errors), "reader_error_samples": reader_errors[:10],
        "writers": figures, "log": log_fig, "dataset": ds_fig,
        "inconsistencies": bad[:20], "inconsistency_count": len(bad),
        "work": work,
    }
    stray = [os.path.join(dp, n) for dp, _, names in os.walk(log_dir) for n in names
             if "tmp" in n]
    if stray:
        bad.append(f"log folder: temporary files left: {stray[:5]}")
    report["log"]["leftover_files"] = stray
    report["inconsistencies"], report["inconsistency_count"] = bad[:20], len(bad)
    text = json.dumps(report, indent=2)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    # Refused appends (readers holding the lock) fail the
    # soak too: appends must wait for readers, not give up.
    failed = bool(bad or reader_errors or figures["appends_failed"] or figures["logger_failed"]
                  or figures["appends_refused_locked"])
    if not a.keep and not failed:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(2)
