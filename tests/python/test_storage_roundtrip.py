"""Record files, packs and datasets on object storage (s3://, gs://), against
real servers on 127.0.0.1: moto's S3 server, the Versity S3 Gateway (a
production S3 server; its cases are skipped where it is not installed, see
mk/storage.mk) and gcp-storage-emulator, all started here and stopped after
(storage_servers.py). Everything goes through
the ordinary API with bucket paths; the answers must equal those of local
copies of the same files."""

from __future__ import annotations

import itertools
import os
import pathlib
import random
import subprocess
import uuid

import numpy as np
import pytest

import a2pack
from a2pack import bag

import storage_servers as ss

boto3 = pytest.importorskip("boto3")

_bucket_ids = itertools.count()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    s3 = ss.start_moto()
    gcs = ss.start_gcs()
    vgw = None
    if ss.find_versitygw():
        vgw = ss.start_versitygw(str(tmp_path_factory.mktemp("versitygw")), "testing", "testing")
    yield {"s3": s3, "gs": gcs, "s3-versitygw": vgw}
    for server in (s3, gcs, vgw):
        if server:
            server.stop()


class Store:
    """One bucket on one server, with direct access to it (boto3 / HTTP)
    to put and get objects behind the library's back."""

    def __init__(self, kind, server, bucket):
        self.kind, self.server, self.bucket = kind, server, bucket
        if kind == "s3":
            self.client = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1",
                                       aws_access_key_id="testing", aws_secret_access_key="testing")
            self.client.create_bucket(Bucket=bucket)
        else:
            ss.gcs_create_bucket(server.url, bucket)

    def url(self, key: str) -> str:
        return f"{self.kind}://{self.bucket}/{key}"

    def put(self, key: str, data: bytes) -> None:
        if self.kind == "s3":
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
        else:
            ss.gcs_put(self.server.url, self.bucket, key, data)

    def get(self, key: str):
        if self.kind == "s3":
            try:
                return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            except self.client.exceptions.NoSuchKey:
                return None
        return ss.gcs_get(self.server.url, self.bucket, key)


def storage_env(monkeypatch, tmp_path, s3_url, gcs_url):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_url)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_url)
    monkeypatch.setenv("A2PACK_CACHE_DIR", str(tmp_path / "cache"))
    # Small parts so modest test files take the multipart / resumable path.
    monkeypatch.setenv("A2PACK_STORAGE_PART_SIZE", str(5 << 20))
    monkeypatch.setenv("A2PACK_STORAGE_TIMEOUT", "30")


@pytest.fixture(params=["s3", "gs", "s3-versitygw"])
def store(request, servers, monkeypatch, tmp_path):
    server = servers[request.param]
    if server is None:
        pytest.skip("versitygw is not installed (make storage-tools needs Go)")
    kind = request.param.split("-")[0]
    s3_url = server.url if kind == "s3" else servers["s3"].url
    storage_env(monkeypatch, tmp_path, s3_url, servers["gs"].url)
    return Store(kind, server, f"bkt{next(_bucket_ids)}-{uuid.uuid4().hex[:8]}")


def cli(*args, check=True):
    exe = os.environ.get("A2PACK_CLI")
    if not exe or not os.path.exists(exe):
        pytest.skip("a2pack CLI not found (set A2PACK_CLI)")
    r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def records(n, seed=0, max_len=3000):
    rng = random.Random(seed)
    # Repetitive content so zstd has something to do; some empty records.
    return [bytes([rng.randrange(4)]) * rng.randrange(0, max_len) + os.urandom(rng.randrange(0, 64))
            for _ in range(n)]


def write_bag(path, recs, placement):
    opts = bag.Writer.Options(limits_placement=placement)
    with bag.Writer(path, opts) as w:
        for r in recs:
            w.write(r)


# ---------------------------------------------------------------- bags

@pytest.mark.parametrize("ext", [".bag", ".bagz"])
@pytest.mark.parametrize("placement", [bag.LimitsPlacement.TAIL, bag.LimitsPlacement.SEPARATE])
def test_bag_round_trip(store, tmp_path, ext, placement):
    recs = records(400, seed=1)
    local = str(tmp_path / f"data{ext}")
    write_bag(local, recs, placement)
    remote = store.url(f"dir/data{ext}")
    write_bag(remote, recs, placement)
    # Byte for byte what the local writer wrote.
    assert store.get(f"dir/data{ext}") == pathlib.Path(local).read_bytes()
    if placement == bag.LimitsPlacement.SEPARATE:
        assert store.get(f"dir/limits.data{ext}") == (tmp_path / f"limits.data{ext}").read_bytes()

    ropts = bag.Reader.Options(limits_placement=placement)
    r = bag.Reader(remote, ropts)
    assert len(r) == len(recs)
    assert list(r) == recs
    assert r[-1] == recs[-1] and list(r[5:9]) == recs[5:9]
    # The pathlib spellings of the same object.
    kind = store.kind
    for alias in (f"/{kind}://{store.bucket}/dir/data{ext}", f"/{kind}:/{store.bucket}/dir/data{ext}"):
        assert bag.Reader(alias, ropts)[3] == recs[3]


def test_bag_random_batches_equal_local(store, tmp_path):
    recs = records(3000, seed=2, max_len=1500)
    local = str(tmp_path / "d.bagz")
    write_bag(local, recs, bag.LimitsPlacement.TAIL)
    store.put("d.bagz", pathlib.Path(local).read_bytes())
    lr = bag.Reader(local)
    rr = bag.Reader(store.url("d.bagz"))
    rng = np.random.default_rng(3)
    total = 0
    for size in (1, 7, 256, 736):  # 1000 random reads in batches
        idx = rng.integers(0, len(recs), size=size)
        assert rr.read_indices(idx) == lr.read_indices(idx)
        total += size
    assert total == 1000
    # Neighbouring records (merged into shared requests) and repeats.
    idx = [10, 11, 12, 12, 2999, 0, 13]
    assert rr.read_indices(idx) == [recs[i] for i in idx]


def test_sharded_specs_over_buckets(store, tmp_path):
    shards = [records(50 + k, seed=10 + k) for k in range(3)]
    for k, recs in enumerate(shards):
        write_bag(store.url(f"s/data-{k:05d}-of-00003.bagz"), recs, bag.LimitsPlacement.TAIL)
    flat = [r for s in shards for r in s]
    assert list(bag.Reader(store.url("s/data@3.bagz"))) == flat
    assert list(bag.Reader(store.url("s/data@*.bagz"))) == flat
    # A comma list mixing a local file and objects.
    local = str(tmp_path / "l.bag")
    write_bag(local, shards[0], bag.LimitsPlacement.TAIL)
    mixed = bag.Reader(f"{local},{store.url('s/data-00001-of-00003.bagz')}")
    assert list(mixed) == shards[0] + shards[1]
    # `@*` with no shard 0 under the prefix: NOT_FOUND naming it.
    with pytest.raises(a2pack.errors.NotFoundError, match="nothere"):
        bag.Reader(store.url("s/nothere@*.bagz"))


def test_bag_multipart_upload_and_cli(store, tmp_path):
    # ~12 MiB stored: three parts of 5 MiB.
    recs = [os.urandom(48 << 10) for _ in range(256)]
    remote = store.url("big.bag")
    write_bag(remote, recs, bag.LimitsPlacement.TAIL)
    local = str(tmp_path / "big.bag")
    write_bag(local, recs, bag.LimitsPlacement.TAIL)
    assert store.get("big.bag") == pathlib.Path(local).read_bytes()
    r = bag.Reader(remote)
    assert list(r) == recs  # sequential: served through read-ahead windows
    info = cli("bag", "info", remote)
    assert "256" in info.stdout


def test_missing_object_is_not_found(store):
    with pytest.raises(a2pack.errors.NotFoundError, match=store.bucket):
        bag.Reader(store.url("nope.bag"))


# ---------------------------------------------------------------- packs

@pytest.mark.parametrize("compress", ["none", "lz4"])
def test_pack_read_validate_export(store, tmp_path, compress):
    ss.make_runs(tmp_path / "runs", first=5, growth=3)
    local = tmp_path / "p.a2pack"
    a2pack.pack_dir(tmp_path / "runs", local, workers=2, compress=compress)
    store.put("packs/p.a2pack", local.read_bytes())
    remote = store.url("packs/p.a2pack")
    with a2pack.PackReader.open(local) as lr, a2pack.PackReader.open(remote) as rr:
        assert len(rr) == len(lr)
        for i in range(len(lr)):
            assert rr.read(i) == lr.read(i)
            assert rr.entry(i) == lr.entry(i)
        idx = [3, 0, 11, 3]
        assert rr.decode_batch(idx, workers=2) == lr.decode_batch(idx, workers=2)
    cli("validate", "--packfile", remote, "--full", "-q")
    out_remote, out_local = tmp_path / "r.jsonl", tmp_path / "l.jsonl"
    cli("to-jsonl", "--packfile", remote, "--output", str(out_remote), "-q")
    cli("to-jsonl", "--packfile", str(local), "--output", str(out_local), "-q")
    assert out_remote.read_bytes() == out_local.read_bytes()
    cli("extract", "--packfile", remote, "--indices", "0,5-7", "-o", str(tmp_path / "x"))
    with a2pack.PackReader.open(local) as lr:
        got = sorted((tmp_path / "x").iterdir())
        assert [p.read_bytes() for p in got] == [lr.read(i) for i in (0, 5, 6, 7)]


# ---------------------------------------------------------------- datasets

def test_dataset_loads_equal_to_local(store, tmp_path):
    ss.make_runs(tmp_path / "runs", n=20, first=5, growth=3)
    ds_dir = tmp_path / "ds"
    a2pack.build_dataset(tmp_path / "runs", ds_dir, workers=2)
    names = sorted(p.name for p in ds_dir.iterdir())
    for name in names:
        store.put(f"datasets/ds/{name}", (ds_dir / name).read_bytes())
    local = a2pack.Dataset(ds_dir)
    remote = a2pack.Dataset(store.url("datasets/ds"))
    assert len(remote) == len(local)
    np.testing.assert_array_equal(remote.steps, local.steps)
    idx = np.random.default_rng(0).integers(0, len(local), size=500)
    np.testing.assert_array_equal(remote.get_batch(idx), local.get_batch(idx))
    # metadata.db and manifest.json sit in the cache, keyed by version.
    cached = list((tmp_path / "cache" / "datasets").rglob("metadata.db"))
    assert len(cached) == 1
    # A second open uses the cache; a changed steps.npy fails its CRC.
    assert len(a2pack.Dataset(store.url("datasets/ds"))) == len(local)
    steps = bytearray((ds_dir / "steps.npy").read_bytes())
    steps[-1] ^= 0xFF
    store.put("datasets/ds/steps.npy", bytes(steps))
    with pytest.raises(a2pack.errors.ChecksumError, match=store.bucket):
        a2pack.Dataset(store.url("datasets/ds"))
    r = cli("dataset", "stats", "-d", store.url("datasets/ds"), check=False)
    assert r.returncode != 0 and store.bucket in r.stderr
