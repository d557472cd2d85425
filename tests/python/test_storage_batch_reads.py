"""Batched and sequential reads from object storage, counted at a proxy.

A pack's batch decoders (decode_batch, decode_batch_columns, iter_batches,
to-jsonl, validate --full) on an s3:// pack must fetch a batch's entries as
one set of merged, parallel ranged requests rather than one request per
entry; a record file read in order must be fetched in large parts, each byte
once. Every answer must equal the one from a local copy. The requests are
counted by the FaultProxy in front of moto's S3 server (storage_servers.py);
the GCS case of a replaced object runs against gcp-storage-emulator.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import uuid

import numpy as np
import pytest

import a2pack
from a2pack import bag

import storage_servers as ss

boto3 = pytest.importorskip("boto3")


@pytest.fixture(scope="module")
def moto():
    s = ss.start_moto()
    yield s
    s.stop()


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("A2PACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("A2PACK_STORAGE_TIMEOUT", "30")
    return monkeypatch


@pytest.fixture
def counted(moto, env):
    """A bucket on moto, reached through a counting proxy: yields
    (client, bucket, proxy)."""
    client = boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    name = f"c-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=name)
    proxy = ss.FaultProxy(moto.url)
    env.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        yield client, name, proxy
    finally:
        proxy.stop()


def gets(proxy, since=0):
    return sum(1 for m, _ in proxy.log[since:] if m == "GET")


def cli(*args):
    exe = os.environ.get("A2PACK_CLI")
    if not exe or not os.path.exists(exe):
        pytest.skip("a2pack CLI not found (set A2PACK_CLI)")
    r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, env=os.environ)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    """A pack of 300 runs, stored and zstd-compressed."""
    tmp = tmp_path_factory.mktemp("packs")
    ss.make_runs(tmp / "runs", n=300, first=5, growth=3)
    out = {}
    for compress in ("none", "zstd"):
        p = tmp / f"p-{compress}.a2pack"
        with a2pack.PackWriter(p, compress=compress) as w:
            for f in sorted((tmp / "runs").iterdir()):
                w.add_file(f)
        out[compress] = p
    return out


@pytest.mark.parametrize("compress", ["none", "zstd"])
def test_remote_pack_batches_are_fetched_together(counted, packs, compress, tmp_path):
    client, bucket, proxy = counted
    local = packs[compress]
    client.put_object(Bucket=bucket, Key="p.a2pack", Body=local.read_bytes())
    url = f"s3://{bucket}/p.a2pack"
    rng = np.random.default_rng(7)
    with a2pack.PackReader.open(local) as lr, a2pack.PackReader.open(url) as rr:
        n = len(lr)
        # Many random indices, repeats included: one batch of ranged requests.
        idx = rng.integers(0, n, size=400).tolist()
        before = len(proxy.log)
        assert rr.decode_batch(idx, workers=2) == lr.decode_batch(idx, workers=2)
        used = gets(proxy, before)
        assert 0 < used < len(idx) // 8, used
        before = len(proxy.log)
        got = rr.decode_batch_columns(idx, workers=2)
        want = lr.decode_batch_columns(idx, workers=2)
        used = gets(proxy, before)
        assert 0 < used < len(idx) // 8, used
        for name in ("boards", "moves", "step_offsets"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), name
        # A whole epoch in shuffled batches of 64 (the C iterator).
        before = len(proxy.log)
        epoch_r = list(rr.iter_batches(64, shuffle=True, seed=3, columns=True))
        epoch_l = list(lr.iter_batches(64, shuffle=True, seed=3, columns=True))
        used = gets(proxy, before)
        assert len(epoch_r) == len(epoch_l) == (n + 63) // 64
        for a, b in zip(epoch_r, epoch_l):
            assert np.array_equal(a.boards, b.boards)
        # Batches of 64 shuffled entries out of 300 have gaps wider than the
        # merge gap, so fewer merges than above - but never a request each.
        assert used < n, used
        # Iteration in order (chunks of decode_batch).
        before = len(proxy.log)
        assert list(rr) == list(lr)
        assert gets(proxy, before) < n // 8
        # Histograms (computed from every entry's header) in waves.
        before = len(proxy.log)
        assert rr.get_stats().highest_tile_hist == lr.get_stats().highest_tile_hist
        assert rr.get_stats().engine_counts == lr.get_stats().engine_counts
        assert gets(proxy, before) < n // 8
        # A bad index is an error before anything is fetched.
        before = len(proxy.log)
        with pytest.raises(a2pack.errors.OutOfRangeError):
            rr.decode_batch([0, n])
        assert gets(proxy, before) == 0, proxy.log[before:]
    # to-jsonl and validate --full read in waves of entries.
    before = len(proxy.log)
    cli("to-jsonl", "--packfile", url, "--output", str(tmp_path / "r.jsonl"), "-q")
    cli("to-jsonl", "--packfile", str(local), "--output", str(tmp_path / "l.jsonl"), "-q")
    assert (tmp_path / "r.jsonl").read_bytes() == (tmp_path / "l.jsonl").read_bytes()
    cli("validate", "--packfile", url, "--full", "-q")
    assert gets(proxy, before) < n // 2


def test_remote_pack_batch_reports_a_corrupt_entry(counted, packs):
    client, bucket, proxy = counted
    data = bytearray(packs["none"].read_bytes())
    with a2pack.PackReader.open(packs["none"]) as lr:
        e = lr.entry(17)
    data[e.offset + e.length // 2] ^= 0xFF
    client.put_object(Bucket=bucket, Key="bad.a2pack", Body=bytes(data))
    with a2pack.PackReader.open(f"s3://{bucket}/bad.a2pack") as rr:
        with pytest.raises(a2pack.errors.ChecksumError, match=r"bad\.a2pack.*entry 17"):
            rr.decode_batch([3, 17, 40])
        with pytest.raises(a2pack.errors.ChecksumError, match=r"entry 17"):
            rr.decode_batch_columns([3, 17, 40])
        assert len(rr.decode_batch([3, 40])) == 2
        with pytest.raises(a2pack.errors.ChecksumError, match=r"entry 17"):
            rr.validate(full=True)


def test_remote_validate_full_finds_bad_padding(counted, packs):
    client, bucket, proxy = counted
    data = bytearray(packs["none"].read_bytes())
    with a2pack.PackReader.open(packs["none"]) as lr:
        e, nxt = lr.entry(40), lr.entry(41)
    assert nxt.offset > e.offset + e.length  # aligned entries leave padding
    data[e.offset + e.length] = 7
    client.put_object(Bucket=bucket, Key="pad.a2pack", Body=bytes(data))
    with a2pack.PackReader.open(f"s3://{bucket}/pad.a2pack") as rr:
        rr.validate(full=False)
        with pytest.raises(a2pack.errors.CorruptError,
                           match=rf"offset {e.offset + e.length}: non-zero byte in the padding between"):
            rr.validate(full=True)


def test_sequential_iteration_fetches_each_byte_once(counted, tmp_path):
    client, bucket, proxy = counted
    rng = np.random.default_rng(1)
    alphabet = np.frombuffer(os.urandom(32), np.uint8)
    recs = [alphabet[rng.zipf(1.6, size=int(rng.integers(20000, 40000))) % 32].tobytes()
            for _ in range(1500)]
    local = tmp_path / "s.bagz"
    with bag.Writer(str(local)) as w:
        for r in recs:
            w.write(r)
    size = local.stat().st_size
    client.put_object(Bucket=bucket, Key="s.bagz", Body=local.read_bytes())
    before = len(proxy.log)
    assert list(bag.Reader(f"s3://{bucket}/s.bagz")) == recs
    ranges = [h for m, h in proxy.log[before:] if m == "GET"]
    # Large parts, not a request per record or per small batch.
    assert len(ranges) < size / (1 << 20) + 8, len(ranges)


def test_forked_child_reads_ahead_on_its_own(counted, tmp_path):
    # A data-loader worker forked while the parent's read-ahead parts are in
    # flight: the child has none of those threads, so it must neither wait
    # for them nor hang at exit; it reads with parts of its own.
    client, bucket, proxy = counted
    rng = np.random.default_rng(2)
    recs = [rng.bytes(int(rng.integers(1 << 18, 1 << 19))) for _ in range(120)]
    local = tmp_path / "f.bag"
    with bag.Writer(str(local)) as w:
        for r in recs:
            w.write(r)
    client.put_object(Bucket=bucket, Key="f.bag", Body=local.read_bytes())
    r = bag.Reader(f"s3://{bucket}/f.bag")
    it = iter(r)
    assert [next(it) for _ in range(30)] == recs[:30]  # parts queued ahead
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if list(r) == recs and r[60] == recs[60] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert list(it) == recs[30:]


def test_gcs_object_replaced_while_open(env, tmp_path):
    """GCS pins the generation seen at open: reads ask for that generation
    (`generation=` and `ifGenerationMatch=`), and the Content-Range total is
    checked too. gcp-storage-emulator keeps no old generations and ignores
    both parameters, so here a replacement of another size is caught by the
    size check, and one of the same size is caught only where the server
    honours the generation (real GCS) - see the second half."""
    gcs = ss.start_gcs()
    proxy = ss.FaultProxy(gcs.url)
    try:
        ss.gcs_create_bucket(gcs.url, "g")
        env.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        recs = [bytes([i % 251]) * (500 + (i * 37) % 3000) for i in range(200)]
        local = tmp_path / "v.bag"
        with bag.Writer(str(local)) as w:
            for r in recs:
                w.write(r)
        ss.gcs_put(gcs.url, "g", "v.bag", local.read_bytes())
        r = bag.Reader("gs://g/v.bag", bag.Reader.Options(access_pattern=bag.AccessPattern.RANDOM))
        assert r[0] == recs[0]
        # Every read after open names the pinned generation.
        reads = [p for m, p in proxy.log if m == "GET" and "alt=media" in p]
        assert reads and all("generation=" in p and "ifGenerationMatch=" in p for p in reads), reads
        with bag.Writer(str(local)) as w:
            for _ in range(50):
                w.write(b"new")
        ss.gcs_put(gcs.url, "g", "v.bag", local.read_bytes())
        with pytest.raises(a2pack.errors.IoError, match=r"gs://g/v\.bag: the object changed"):
            r[1]
        assert bag.Reader("gs://g/v.bag")[1] == b"new"
    finally:
        proxy.stop()
        gcs.stop()


@pytest.mark.parametrize("status", [412, 404])
def test_gcs_generation_mismatch_is_a_clear_error(env, tmp_path, status):
    """What real GCS answers a read pinned to a replaced generation (412
    Precondition Failed for ifGenerationMatch; 404 for a generation that no
    longer exists), played by the proxy in front of the emulator, which
    itself ignores both parameters and serves the newest bytes (checked in
    gcp-storage-emulator 2026.7.19: no x-goog-generation header either), so
    a same-size replacement cannot be caught against it."""
    gcs = ss.start_gcs()
    state = {"replaced": False}

    def rule(n, method, path, headers):
        if state["replaced"] and method == "GET" and "alt=media" in path:
            return f"status:{status}"
        return None

    proxy = ss.FaultProxy(gcs.url, rule)
    try:
        ss.gcs_create_bucket(gcs.url, "g")
        env.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        local = tmp_path / "x.bag"
        with bag.Writer(str(local)) as w:
            for i in range(100):
                w.write(bytes([i]) * 1000)
        ss.gcs_put(gcs.url, "g", "x.bag", local.read_bytes())
        r = bag.Reader("gs://g/x.bag", bag.Reader.Options(access_pattern=bag.AccessPattern.RANDOM))
        assert r[0] == bytes([0]) * 1000
        state["replaced"] = True
        with pytest.raises(a2pack.errors.IoError, match=r"gs://g/x\.bag: the object changed"):
            r[5]
    finally:
        proxy.stop()
        gcs.stop()
