"""Writers streaming to object storage (s3://, gs://), against real servers on
127.0.0.1 (moto's S3 server, gcp-storage-emulator; storage_servers.py): bag
writers, `a2pack pack -o`, `a2pack to-jsonl --output` and `a2pack convert`
upload as they go, the object equals a local write byte for byte, appears
only when the writer succeeds, and a failed or abandoned writer leaves no
object, no multipart upload and nothing in $TMPDIR."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

import a2pack
from a2pack import bag

import storage_servers as ss
from cli_util import cli_path

boto3 = pytest.importorskip("boto3")
bagz = pytest.importorskip("bagz")

PART = 5 << 20  # the smallest S3 part: a few MiB take the multipart path


@pytest.fixture(scope="module")
def servers():
    s3 = ss.start_moto()
    gcs = ss.start_gcs()
    yield {"s3": s3, "gs": gcs}
    s3.stop()
    gcs.stop()


@pytest.fixture
def tmpdir_env(monkeypatch, tmp_path):
    """A private, empty $TMPDIR: whatever a writer leaves there shows."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    return d


class Store:
    def __init__(self, kind, server, monkeypatch, tmp_path, endpoint=None):
        self.kind, self.server = kind, server
        self.bucket = f"w{uuid.uuid4().hex[:10]}"
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        monkeypatch.setenv("A2PACK_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("A2PACK_STORAGE_PART_SIZE", str(PART))
        monkeypatch.setenv("A2PACK_STORAGE_TIMEOUT", "20")
        monkeypatch.setenv("A2PACK_STORAGE_RETRIES", "1")
        self.monkeypatch = monkeypatch
        self.via(server.url)
        if kind == "s3":
            self.client = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1",
                                       aws_access_key_id="testing", aws_secret_access_key="testing")
            self.client.create_bucket(Bucket=self.bucket)
        else:
            ss.gcs_create_bucket(server.url, self.bucket)

    def via(self, endpoint):
        """Send the library's requests to `endpoint` (a FaultProxy or the server)."""
        var = "AWS_ENDPOINT_URL" if self.kind == "s3" else "STORAGE_EMULATOR_HOST"
        self.monkeypatch.setenv(var, endpoint)

    def url(self, key):
        return f"{self.kind}://{self.bucket}/{key}"

    def get(self, key):
        if self.kind == "s3":
            try:
                return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            except self.client.exceptions.NoSuchKey:
                return None
        return ss.gcs_get(self.server.url, self.bucket, key)

    def uploads(self):
        """Multipart uploads still open (S3)."""
        if self.kind != "s3":
            return []
        return self.client.list_multipart_uploads(Bucket=self.bucket).get("Uploads", [])


@pytest.fixture(params=["s3", "gs"])
def store(request, servers, monkeypatch, tmp_path, tmpdir_env):
    return Store(request.param, servers[request.param], monkeypatch, tmp_path)


def run_cli(*args):
    import subprocess
    return subprocess.run([cli_path(), *args], capture_output=True, text=True, timeout=120)


def write_bag(path, recs, placement=bag.LimitsPlacement.TAIL):
    with bag.Writer(path, bag.Writer.Options(limits_placement=placement)) as w:
        for r in recs:
            w.write(r)


def bagz_records(path, placement):
    opts = bagz.Reader.Options(limits_placement=getattr(bagz.LimitsPlacement, placement.name))
    return list(bagz.Reader(str(path), opts))


# ---------------------------------------------------------------- bags

@pytest.mark.parametrize("placement", [bag.LimitsPlacement.TAIL, bag.LimitsPlacement.SEPARATE])
def test_bag_streams_equal_to_local(store, tmp_path, tmpdir_env, placement):
    # ~11 MiB of records (three parts) and 140 000 limits, past the 1 MiB of
    # limits held in memory: TAIL limits spill (unnamed, in $TMPDIR) and are
    # appended at commit; SEPARATE limits stream to a second object.
    rng = np.random.default_rng(5)
    big = [rng.bytes(64 << 10) for _ in range(170)]
    recs = big + [bytes([i % 7]) * (i % 5) for i in range(140_000)]
    remote = store.url("b/data.bagz")
    with bag.Writer(remote, bag.Writer.Options(limits_placement=placement)) as w:
        for r in recs:
            w.write(r)
        # Mid-write: nothing the size of the file on local disk, nothing visible.
        assert list(tmpdir_env.iterdir()) == []
        assert store.get("b/data.bagz") is None
    assert list(tmpdir_env.iterdir()) == []
    local = tmp_path / "data.bagz"
    write_bag(str(local), recs, placement)
    got = store.get("b/data.bagz")
    assert got == local.read_bytes()
    # The upstream reader, on a download of the objects.
    down = tmp_path / "down"
    down.mkdir()
    (down / "data.bagz").write_bytes(got)
    if placement == bag.LimitsPlacement.SEPARATE:
        limits = store.get("b/limits.data.bagz")
        assert limits == (tmp_path / "limits.data.bagz").read_bytes()
        (down / "limits.data.bagz").write_bytes(limits)
    assert bagz_records(down / "data.bagz", placement) == recs
    assert store.uploads() == []


@pytest.mark.parametrize("placement", [bag.LimitsPlacement.TAIL, bag.LimitsPlacement.SEPARATE])
def test_abandoned_bag_writer_leaves_nothing(store, tmpdir_env, placement):
    rng = np.random.default_rng(6)
    with pytest.raises(RuntimeError, match="caller failed"):
        with bag.Writer(store.url("gone.bag"), bag.Writer.Options(limits_placement=placement)) as w:
            for _ in range(200_000):  # limits spilled too
                w.write(b"abc")
            for _ in range(14):  # two parts sent, a multipart upload under way
                w.write(rng.bytes(1 << 20))
            raise RuntimeError("caller failed")
    assert store.get("gone.bag") is None
    assert store.get("limits.gone.bag") is None
    assert store.uploads() == []
    assert list(tmpdir_env.iterdir()) == []


def test_killed_bag_writer_leaves_nothing(store, tmpdir_env):
    # SIGKILL while a part is held back by the proxy: no object, and the
    # limits spill (unnamed) is gone with the process.
    import subprocess
    import sys
    import textwrap
    import time
    part_put = (lambda m, path: m == "PUT" and "partNumber" in path) if store.kind == "s3" \
        else (lambda m, path: m == "PUT")
    proxy = ss.FaultProxy(store.server.url, lambda n, m, path, h: "delay:30" if part_put(m, path) else None)
    try:
        store.via(proxy.url)
        script = textwrap.dedent(f"""
            import os
            from a2pack import bag
            with bag.Writer("{store.url('killed.bag')}") as w:
                for _ in range(200_000):
                    w.write(b"abc")
                for _ in range(12):
                    w.write(os.urandom(1 << 20))
        """)
        child = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ))
        deadline = time.monotonic() + 60
        while not any(part_put(m, p) for m, p in proxy.log):
            assert child.poll() is None, "the writer finished before it was killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child.kill()
        child.wait()
    finally:
        proxy.stop()
    assert store.get("killed.bag") is None
    assert list(tmpdir_env.iterdir()) == []


def test_forked_child_leaves_the_parents_upload_alone(store, tmp_path):
    # A child forked mid-upload cannot write or finish the parent's object,
    # and dropping its copy neither aborts the parent's upload nor waits for
    # part threads that do not exist in the child.
    rng = np.random.default_rng(8)
    recs = [rng.bytes(1 << 20) for _ in range(7)]  # a part sent or in flight
    w = bag.Writer(store.url("forked.bag"))
    for r in recs:
        w.write(r)
    w.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                w.write(b"child")
                w.flush()
            except a2pack.errors.ClosedError:
                code = 0
            w._abandon()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    w.write(b"last")
    w.close()
    local = tmp_path / "forked.bag"
    write_bag(str(local), recs + [b"last"])
    assert store.get("forked.bag") == local.read_bytes()


def test_bag_upload_failing_midway_is_aborted(store, tmpdir_env):
    # The second part (S3) / the second chunk (GCS) is refused.
    proxy = ss.FaultProxy(store.server.url, ss.refuse_nth_put(2))
    try:
        store.via(proxy.url)
        rng = np.random.default_rng(7)
        with pytest.raises(a2pack.errors.IoError, match=rf"{store.kind}://{store.bucket}/f\.bag.*HTTP 403"):
            with bag.Writer(store.url("f.bag")) as w:
                for _ in range(16):
                    w.write(rng.bytes(1 << 20))
        assert store.get("f.bag") is None
        assert store.uploads() == []
        assert list(tmpdir_env.iterdir()) == []
    finally:
        proxy.stop()


def test_separate_limits_never_mismatched(store, tmpdir_env):
    # Overwriting a SEPARATE bag whose limits upload is refused: the old
    # limits are gone, so the new records are never read through them.
    sep = bag.LimitsPlacement.SEPARATE
    write_bag(store.url("s.bag"), [b"old-%d" % i for i in range(50)], sep)
    proxy = ss.FaultProxy(store.server.url, lambda n, m, path, h:
                          "status:403" if m in ("PUT", "POST") and "limits.s.bag" in path else None)
    try:
        store.via(proxy.url)
        with pytest.raises(a2pack.errors.IoError, match=rf"{store.kind}://{store.bucket}/limits\.s\.bag.*HTTP 403"):
            write_bag(store.url("s.bag"), [b"new record %d" % i for i in range(30)], sep)
    finally:
        proxy.stop()
    store.via(store.server.url)
    assert store.get("limits.s.bag") is None
    with pytest.raises(a2pack.errors.NotFoundError, match="limits.s.bag"):
        bag.Reader(store.url("s.bag"), bag.Reader.Options(limits_placement=sep))


# ---------------------------------------------------------------- CLI outputs

@pytest.mark.parametrize("align", ["4096", "1048576"])
def test_cli_pack_to_object_storage(store, tmp_path, tmpdir_env, align):
    # align 1 MiB: a 12 MiB pack, so S3 sends the header and index last, as
    # part 1 with the first payloads behind them.
    ss.make_runs(tmp_path / "runs")
    local = tmp_path / "p.a2pack"
    r = run_cli("pack", "-i", str(tmp_path / "runs"), "-o", str(local), "--align", align, "-q")
    assert r.returncode == 0, r.stderr
    r = run_cli("pack", "-i", str(tmp_path / "runs"), "-o", store.url("p.a2pack"), "--align", align, "-q")
    assert r.returncode == 0, r.stderr
    assert store.get("p.a2pack") == local.read_bytes()
    assert store.uploads() == []
    assert list(tmpdir_env.iterdir()) == []
    r = run_cli("validate", "--packfile", store.url("p.a2pack"), "--full", "-q")
    assert r.returncode == 0, r.stderr


def test_pack_writer_unknown_count_to_object_storage(store, tmp_path, tmpdir_env):
    # No expected count: the index size is known only at finish.
    ss.make_runs(tmp_path / "runs", n=5)
    files = sorted((tmp_path / "runs").iterdir())
    for path, name in ((str(tmp_path / "w.a2pack"), None), (store.url("w.a2pack"), "w.a2pack")):
        with a2pack.PackWriter(path, align=1 << 20) as w:
            for f in files:
                w.add_file(f)
            w.add_file(files[0])
            if name:
                assert store.get(name) is None
    assert store.get("w.a2pack") == (tmp_path / "w.a2pack").read_bytes()
    with pytest.raises(RuntimeError):
        with a2pack.PackWriter(store.url("x.a2pack"), align=1 << 20) as w:
            for f in files * 2:
                w.add_file(f)
            raise RuntimeError("caller failed")
    assert store.get("x.a2pack") is None
    assert store.uploads() == []
    assert list(tmpdir_env.iterdir()) == []


def test_cli_to_jsonl_to_object_storage(store, tmp_path, tmpdir_env):
    ss.make_runs(tmp_path / "runs", n=30, scale=3)
    pack = tmp_path / "p.a2pack"
    assert run_cli("pack", "-i", str(tmp_path / "runs"), "-o", str(pack), "-q").returncode == 0
    for mode in ([], ["--steps"]):
        local = tmp_path / "out.jsonl"
        r = run_cli("to-jsonl", "--packfile", str(pack), "--output", str(local), "-q", *mode)
        assert r.returncode == 0, r.stderr
        r = run_cli("to-jsonl", "--packfile", str(pack), "--output", store.url("o/out.jsonl"), "-q", *mode)
        assert r.returncode == 0, r.stderr
        assert store.get("o/out.jsonl") == local.read_bytes()
    assert local.stat().st_size > 2 * PART  # the steps export took the multipart path
    assert store.uploads() == []
    assert list(tmpdir_env.iterdir()) == []


def test_cli_bag_commands_to_object_storage(store, tmp_path, tmpdir_env):
    ss.make_runs(tmp_path / "runs", n=6)
    for out in ("runs.bagz", "runs.a2pack"):
        local = tmp_path / out
        r = run_cli("bag", "convert", str(tmp_path / "runs"), str(local))
        assert r.returncode == 0, r.stderr
        r = run_cli("bag", "convert", str(tmp_path / "runs"), store.url(f"c/{out}"))
        assert r.returncode == 0, r.stderr
        assert store.get(f"c/{out}") == local.read_bytes()
    r = run_cli("bag", "write", str(tmp_path / "w.bag"), str(tmp_path / "runs"))
    assert r.returncode == 0, r.stderr
    r = run_cli("bag", "write", store.url("c/w.bag"), str(tmp_path / "runs"))
    assert r.returncode == 0, r.stderr
    assert store.get("c/w.bag") == (tmp_path / "w.bag").read_bytes()
    assert list(tmpdir_env.iterdir()) == []


@pytest.mark.parametrize("what", ["pack", "to-jsonl"])
def test_cli_output_failing_midway_leaves_no_object(store, tmp_path, tmpdir_env, what):
    ss.make_runs(tmp_path / "runs", n=30, scale=3)
    pack = tmp_path / "p.a2pack"
    assert run_cli("pack", "-i", str(tmp_path / "runs"), "-o", str(pack), "-q").returncode == 0
    proxy = ss.FaultProxy(store.server.url, ss.refuse_nth_put(2))
    try:
        store.via(proxy.url)
        if what == "pack":
            args = ["pack", "-i", str(tmp_path / "runs"), "--align", "1048576"]
        else:
            args = ["to-jsonl", "--packfile", str(pack), "--steps"]
        r = run_cli(*args, "-o", store.url("bad.out"), "-q")
        assert r.returncode != 0
        assert store.url("bad.out") in r.stderr and "403" in r.stderr, r.stderr
        assert any(m == "PUT" for m, _ in proxy.log)
    finally:
        proxy.stop()
    assert store.get("bad.out") is None
    assert store.uploads() == []
    assert list(tmpdir_env.iterdir()) == []


def test_cli_pack_bad_input_midway_aborts_the_upload(store, tmp_path, tmpdir_env):
    # A bad run file after 12 MiB of payloads (parts already sent): the
    # pack fails naming the file, and the upload is aborted.
    ss.make_runs(tmp_path / "runs")
    (tmp_path / "runs" / "run-999.a2run2").write_bytes(b"not a run file" * 100)
    r = run_cli("pack", "-i", str(tmp_path / "runs"), "-o", store.url("bad.a2pack"), "--align", "1048576", "-q")
    assert r.returncode != 0 and "run-999.a2run2" in r.stderr, r.stderr
    assert store.get("bad.a2pack") is None
    assert store.uploads() == []
    assert list(tmpdir_env.iterdir()) == []


def test_cli_output_server_stopped(tmp_path, tmpdir_env, monkeypatch):
    # An S3 server that goes away before the upload: a clear error naming
    # the URL, in bounded time.
    s3 = ss.start_moto()
    store = Store("s3", s3, monkeypatch, tmp_path)
    monkeypatch.setenv("A2PACK_STORAGE_CONNECT_TIMEOUT", "1")
    ss.make_runs(tmp_path / "runs", n=4)
    s3.stop()
    r = run_cli("pack", "-i", str(tmp_path / "runs"), "-o", store.url("p.a2pack"), "-q")
    assert r.returncode != 0
    assert store.url("p.a2pack") in r.stderr, r.stderr
    assert list(tmpdir_env.iterdir()) == []


def test_dataset_build_and_append_refuse_buckets(tmp_path, tmpdir_env, monkeypatch):
    # Datasets are built in a local folder: a bucket path is refused at once,
    # naming it, and nothing is created locally under a look-alike name.
    ss.make_runs(tmp_path / "runs", n=3)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(a2pack.errors.UnsupportedError, match=r"s3://b/ds: datasets are built"):
        a2pack.build_dataset(tmp_path / "runs", "s3://b/ds")
    with pytest.raises(a2pack.errors.UnsupportedError, match=r"gs://b/ds: datasets are built"):
        a2pack.append_dataset("gs://b/ds", tmp_path / "runs")
    r = run_cli("dataset", "build", "-i", str(tmp_path / "runs"), "-o", "s3://b/ds", "-q")
    assert r.returncode != 0 and "s3://b/ds: datasets are built" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs", "tmpdir"]
