"""Record files on S3: a2pack against Python clients reading the same ranges.

One run, one server on 127.0.0.1, started here: the Versity S3 Gateway
(versitygw, a production S3 server over a local folder; `make bench-tools`
installs it) when it is there, else moto's S3 server; or --endpoint URL.
One .bagz of N records of ~48 KiB (default 100 000 on a real server, 3 000
on moto; --records sets it), uploaded once. Then, each contender in its own
fresh process, on the same seeded batches:

  random batches of 256 records
    a2pack      bag.Reader("s3://...").read_indices(batch)  (ranges merged,
                fetched in parallel, records decompressed)
    s3fs        fs.cat_ranges(...) of the same 256 byte ranges (asyncio,
                compressed bytes only: no decompression)
    boto3       get_object(Range=...) per record in a 32-thread pool
                (compressed bytes only)
  sequential read of the whole file
    a2pack      iterate every record (read-ahead; records decompressed), and
                again with CompressionNone (the stored records: the bytes the
                download fetches, without zstd's work)
    boto3       download_file (the `aws s3 cp` transfer manager) to /dev/shm

Figures are records/s and MB/s of stored bytes; ratios are against the better
baseline of the same run, and go to bench-out/ (bench/results.py) too. The
server is the same process for all of them, so it bounds every contender
alike. s3fs may need its own environment (it pins botocore): --s3fs-python
PATH runs its worker there.

moto copies the whole object for every GET (ranged or not) under a lock, so
its cost per request grows with the file: 3 000 records (69 MiB) is what a
small machine holds there (the s3fs worker alone peaks near 18 GiB of memory
even then); the full 100 000 need a real S3 server (versitygw, or --endpoint).

  make bench-tools                                  # versitygw into .tools/bin
  .venv/bin/python bench/storage_compare.py         # versitygw: 100 000 records, 20 batches
  .venv/bin/python bench/storage_compare.py --server moto   # 3 000 records, 2 batches
  .venv/bin/python bench/storage_compare.py --endpoint http://127.0.0.1:9000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

BUCKET = "bench"
KEY = "data.bagz"


def make_records(n: int, seed: int = 0):
    """~48 KiB records that zstd shrinks about 2x (bytes from a skewed
    alphabet), generated quickly."""
    import numpy as np
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(os.urandom(64), np.uint8)
    for _ in range(n):
        k = int(rng.integers(40 << 10, 56 << 10))
        yield alphabet[rng.zipf(1.6, size=k) % 64].tobytes()


# ---------------------------------------------------------------- workers

def worker_a2pack(spec):
    from a2pack import bag
    url = f"s3://{BUCKET}/{KEY}"
    out = {}
    r = bag.Reader(url)
    t = time.perf_counter()
    n = 0
    for batch in spec["batches"]:
        n += len(r.read_indices(batch))
    out["random_s"] = time.perf_counter() - t
    out["random_records"] = n
    r = bag.Reader(url)
    t = time.perf_counter()
    count = 0
    for _ in r:
        count += 1
    out["seq_s"] = time.perf_counter() - t
    out["seq_records"] = count
    # The same iteration handing out the stored (compressed) records: the
    # bytes download_file fetches, without zstd's work.
    r = bag.Reader(url, bag.Reader.Options(compression=bag.CompressionNone()))
    t = time.perf_counter()
    for _ in r:
        pass
    out["seq_stored_s"] = time.perf_counter() - t
    return out


def worker_boto3(spec):
    import concurrent.futures
    import boto3
    s3 = boto3.client("s3", endpoint_url=spec["endpoint"], region_name="us-east-1",
                      aws_access_key_id="bench", aws_secret_access_key="bench")
    begins, ends = spec["begins"], spec["ends"]

    def get(i):
        return s3.get_object(Bucket=BUCKET, Key=KEY,
                             Range=f"bytes={begins[i]}-{ends[i] - 1}")["Body"].read()

    out = {}
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        get(0)  # connection set up outside the timing, as the others open first
        t = time.perf_counter()
        n = 0
        for batch in spec["batches"]:
            n += len(list(pool.map(get, batch)))
        out["random_s"] = time.perf_counter() - t
        out["random_records"] = n
    with tempfile.NamedTemporaryFile(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as f:
        t = time.perf_counter()
        s3.download_file(BUCKET, KEY, f.name)
        out["seq_s"] = time.perf_counter() - t
        out["seq_bytes"] = os.path.getsize(f.name)
    return out


def worker_s3fs(spec):
    import s3fs
    fs = s3fs.S3FileSystem(key="bench", secret="bench",
                           client_kwargs={"endpoint_url": spec["endpoint"], "region_name": "us-east-1"})
    begins, ends = spec["begins"], spec["ends"]
    path = f"{BUCKET}/{KEY}"
    fs.cat_ranges([path], [0], [8])
    out = {}
    t = time.perf_counter()
    n = 0
    for batch in spec["batches"]:
        n += len(fs.cat_ranges([path] * len(batch), [begins[i] for i in batch], [ends[i] for i in batch]))
    out["random_s"] = time.perf_counter() - t
    out["random_records"] = n
    return out


WORKERS = {"a2pack": worker_a2pack, "boto3": worker_boto3, "s3fs": worker_s3fs}


def run_worker(name, spec_path, python):
    env = dict(os.environ)
    r = subprocess.run([python, os.path.abspath(__file__), "--worker", name, spec_path],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        last = (r.stderr or r.stdout).strip().splitlines()[-1:]
        return {"error": last or [f"exit status {r.returncode} (killed by signal {-r.returncode})"
                                  if r.returncode < 0 else f"exit status {r.returncode}"]}
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- driver

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=None,
                    help="records in the file (default 100 000 with --endpoint, 3 000 on moto)")
    ap.add_argument("--batches", type=int, default=None,
                    help="random batches (default 20 with --endpoint, 2 on moto)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--server", choices=("auto", "versitygw", "moto"), default="auto",
                    help="the S3 server started here (auto: versitygw when found, else moto)")
    ap.add_argument("--endpoint", help="an S3 endpoint to use instead of starting a server")
    ap.add_argument("--data-dir", help="versitygw: keep the file and the server's folder here "
                    "and reuse them in the next run with the same --records (writing 100 000 "
                    "records and uploading them takes about 12 minutes on 2 cores)")
    ap.add_argument("--s3fs-python", default=sys.executable)
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        name, spec_path = args.worker
        with open(spec_path) as f:
            spec = json.load(f)
        print(json.dumps(WORKERS[name](spec)))
        return

    import boto3
    import numpy as np
    from a2pack import bag

    import storage_servers as ss
    kind = args.server
    if kind == "auto":
        kind = "versitygw" if ss.find_versitygw() else "moto"
    # moto holds what `make bench` can run on a small machine; the full
    # 100 000 records need a real S3 server.
    real = bool(args.endpoint) or kind == "versitygw"
    if args.records is None:
        args.records = 100_000 if real else 3_000
    if args.batches is None:
        args.batches = 20 if real else 2

    load_before = os.getloadavg()
    server = None
    endpoint = args.endpoint
    server_root = None
    data_dir = None
    if not endpoint:
        if kind == "versitygw":
            if args.data_dir:
                # Kept for the next run: the file, the server's folder (the object).
                data_dir = os.path.abspath(args.data_dir)
                os.makedirs(os.path.join(data_dir, "s3"), exist_ok=True)
                root = os.path.join(data_dir, "s3")
            else:
                server_root = tempfile.TemporaryDirectory(prefix="a2pack-s3-")
                root = server_root.name
            # Its default 1 MiB buffer per GET (allocated and cleared for a
            # 23 KB range) made Go's allocator and collector the bound of
            # every client: 1.1-1.6 ms of server CPU per ranged GET.
            server = ss.start_versitygw(root, "bench", "bench",
                                        posix_options=["--io-buffer-size", str(64 << 10)])
        else:
            server = ss.start_moto()
        endpoint = server.url
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint)
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(data_dir or tmp, KEY)
            stamp = os.path.join(data_dir or tmp, "records.txt")
            reuse = data_dir and os.path.exists(stamp) and open(stamp).read().strip() == str(args.records)
            if reuse:
                print(f"# reusing {local} and the object under {data_dir}", file=sys.stderr)
            else:
                if data_dir and os.path.exists(stamp):
                    os.remove(stamp)
                t = time.perf_counter()
                with bag.Writer(local) as w:
                    for rec in make_records(args.records):
                        w.write(rec)
                try:
                    s3.create_bucket(Bucket=BUCKET)
                except s3.exceptions.BucketAlreadyOwnedByYou:
                    pass
                s3.upload_file(local, BUCKET, KEY)
                with open(stamp, "w") as f:
                    f.write(str(args.records))
                print(f"# {args.records} records, {os.path.getsize(local) / 2**20:.0f} MiB stored, "
                      f"written and uploaded in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            size = os.path.getsize(local)
            with open(local, "rb") as f:
                f.seek(-8, 2)
                start = int.from_bytes(f.read(8), "little")
                f.seek(start)
                ends = np.frombuffer(f.read(size - start), "<u8")
            begins = np.concatenate([np.zeros(1, ends.dtype), ends[:-1]])  # integers: they go into Range headers
            rng = np.random.default_rng(0)
            batches = [rng.integers(0, args.records, size=args.batch_size).tolist()
                       for _ in range(args.batches)]
            spec = {"endpoint": endpoint, "batches": batches, "begins": begins.tolist(),
                    "ends": ends.tolist()}
            spec_path = os.path.join(tmp, "spec.json")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            res = {}
            for name in ("a2pack", "boto3", "s3fs"):
                python = args.s3fs_python if name == "s3fs" else sys.executable
                res[name] = run_worker(name, spec_path, python)
                print(f"# {name}: {res[name]}", file=sys.stderr)
    finally:
        if server:
            server.stop()
        if server_root:
            server_root.cleanup()

    n = args.batches * args.batch_size
    stored_mb = size / 1e6
    rows = []
    rate = {k: n / v["random_s"] for k, v in res.items() if "random_s" in v}
    best = max((rate[k] for k in ("s3fs", "boto3") if k in rate), default=None)
    for k in ("a2pack", "s3fs", "boto3"):
        if k in rate:
            rows.append(f"| random batches of {args.batch_size} | {k} | {rate[k]:,.0f} records/s | "
                        f"{rate[k] / best:.2f}x |" if best else "")
        else:
            rows.append(f"| random batches of {args.batch_size} | {k} | not run: {res[k].get('error')} | |")
    seq = {}
    if "seq_s" in res.get("a2pack", {}):
        seq["a2pack, records decompressed"] = stored_mb / res["a2pack"]["seq_s"]
        seq["a2pack, stored records"] = stored_mb / res["a2pack"]["seq_stored_s"]
    if "seq_s" in res.get("boto3", {}):
        seq["boto3 download_file"] = stored_mb / res["boto3"]["seq_s"]
    base = seq.get("boto3 download_file")
    for k, v in seq.items():
        rows.append(f"| sequential, whole file | {k} | {v:,.0f} MB/s | {v / base:.2f}x |" if base else "")
    load_after = os.getloadavg()
    where = {"moto": "moto S3 server", "versitygw": "versitygw S3 server (POSIX backend)"}[kind] + \
        " on 127.0.0.1" if server else f"S3 endpoint {endpoint}"
    print(f"{args.records} records of ~48 KiB (.bagz, {size / 2**20:.0f} MiB), {where}, "
          f"{os.cpu_count()} cores, load average {load_before[0]:.1f} before / {load_after[0]:.1f} after\n")
    print("| read | client | rate | vs best baseline |")
    print("|---|---|---|---|")
    print("\n".join(r for r in rows if r))

    from results import emit  # bench/results.py: the summary table of `make bench`
    note = f"{kind if server else endpoint}, {args.records} records, {size / 2**20:.0f} MiB .bagz, load {load_before[0]:.1f}/{load_after[0]:.1f}"
    if "a2pack" in rate:
        base_name = max((k for k in ("s3fs", "boto3") if k in rate), key=lambda k: rate[k], default=None)
        emit("storage", f"S3 random batches of {args.batch_size}", rate["a2pack"],
             {"s3fs": "s3fs cat_ranges", "boto3": "boto3 get_object, 32 threads"}.get(base_name, "none"),
             rate.get(base_name) if base_name else None, "records/s", target=3.0, note=note)
    if "a2pack, stored records" in seq:
        emit("storage", "S3 sequential read of the whole file (records decompressed)",
             seq["a2pack, records decompressed"], "boto3 download_file", base, "MB/s", target=0.8, note=note)
        emit("storage", "S3 sequential read of the whole file (stored records)",
             seq["a2pack, stored records"], "boto3 download_file", base, "MB/s", target=0.8, note=note)


if __name__ == "__main__":
    main()
