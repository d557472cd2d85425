"""Object storage under faults, against real servers on 127.0.0.1 (moto's S3
server, gcp-storage-emulator) with a fault-injecting proxy in front
(storage_servers.FaultProxy): retried faults give correct answers, the rest
are clear errors naming the URL, in bounded time, and a writer never leaves a
partial object."""

from __future__ import annotations

import json
import os
import pathlib
import resource
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

import a2pack
from a2pack import bag

import storage_servers as ss

boto3 = pytest.importorskip("boto3")

N = 600


def recs():
    return [bytes([i % 251]) * (500 + (i * 37) % 3000) for i in range(N)]


@pytest.fixture(scope="module")
def moto():
    s = ss.start_moto()
    yield s
    s.stop()


def s3_client(url, key="testing", secret="testing"):
    return boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret)


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("A2PACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("A2PACK_STORAGE_PART_SIZE", str(5 << 20))
    monkeypatch.setenv("A2PACK_STORAGE_TIMEOUT", "20")
    monkeypatch.setenv("A2PACK_STORAGE_CONNECT_TIMEOUT", "1")
    return monkeypatch


@pytest.fixture
def bucket(moto):
    name = f"f-{uuid.uuid4().hex[:10]}"
    s3_client(moto.url).create_bucket(Bucket=name)
    return name


def put_bag(tmp_path, client, bucket, key, data=None):
    data = data if data is not None else recs()
    local = str(tmp_path / key.replace("/", "_"))
    with bag.Writer(local) as w:
        for r in data:
            w.write(r)
    client.put_object(Bucket=bucket, Key=key, Body=pathlib.Path(local).read_bytes())
    return data


# ---------------------------------------------------------------- retried faults

def test_injected_500s_and_dropped_connections_are_retried(moto, bucket, env, tmp_path):
    expected = put_bag(tmp_path, s3_client(moto.url), bucket, "r.bag")
    faults = ["500", "drop", "drop-mid-body", "status:503", "status:429"]

    def rule(n, method, path, headers):
        return faults[n // 2 % len(faults)] if n % 2 == 1 else None

    proxy = ss.FaultProxy(moto.url, rule)
    try:
        env.setenv("AWS_ENDPOINT_URL", proxy.url)
        r = bag.Reader(f"s3://{bucket}/r.bag")
        assert list(r) == expected
        assert r.read_indices([5, 599, 0, 300]) == [expected[i] for i in (5, 599, 0, 300)]
        # Written through the same faults: multipart (3 parts) and completed.
        big = [os.urandom(1 << 20) for _ in range(12)]
        with bag.Writer(f"s3://{bucket}/w.bag") as w:
            for x in big:
                w.write(x)
        assert list(bag.Reader(f"s3://{bucket}/w.bag")) == big
        assert any("partNumber=3" in p for _, p in proxy.log)
        assert proxy.count > 10  # faults were injected and retried
    finally:
        proxy.stop()


def test_gcs_faults_are_retried(env, tmp_path):
    gcs = ss.start_gcs()
    proxy = ss.FaultProxy(gcs.url, lambda n, *a: "500" if n % 2 == 1 else None)
    try:
        ss.gcs_create_bucket(gcs.url, "g")
        env.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        data = recs()
        with bag.Writer("gs://g/x.bagz") as w:
            for x in data:
                w.write(x)
        assert list(bag.Reader("gs://g/x.bagz")) == data
        assert proxy.count > 4
    finally:
        proxy.stop()
        gcs.stop()


# ---------------------------------------------------------------- bounded errors

def test_server_stopped_mid_read_fails_within_the_deadline(env, tmp_path):
    server = ss.start_moto()
    try:
        client = s3_client(server.url)
        client.create_bucket(Bucket="bkt")
        expected = put_bag(tmp_path, client, "bkt", "x.bag")
        env.setenv("AWS_ENDPOINT_URL", server.url)
        env.setenv("A2PACK_STORAGE_TIMEOUT", "3")
        r = bag.Reader("s3://bkt/x.bag", bag.Reader.Options(access_pattern=bag.AccessPattern.RANDOM))
        assert r[10] == expected[10]
    finally:
        server.stop()
    t0 = time.monotonic()
    with pytest.raises(a2pack.errors.IoError, match=r"s3://bkt/x\.bag.*gave up after"):
        r[20]
    # Bounded: the 3 s deadline plus the last attempt's connect timeout, with
    # room for a loaded machine; a hang would run into pytest's timeout instead.
    assert time.monotonic() - t0 < 30


def test_stalled_server_is_abandoned(moto, bucket, env, tmp_path):
    put_bag(tmp_path, s3_client(moto.url), bucket, "s.bag")
    proxy = ss.FaultProxy(moto.url, lambda n, m, path, h: "delay:20" if m == "GET" else None)
    try:
        env.setenv("AWS_ENDPOINT_URL", proxy.url)
        env.setenv("A2PACK_STORAGE_TIMEOUT", "2")
        env.setenv("A2PACK_STORAGE_STALL_TIMEOUT", "1")
        t0 = time.monotonic()
        with pytest.raises(a2pack.errors.IoError, match=rf"s3://{bucket}/s\.bag"):
            bag.Reader(f"s3://{bucket}/s.bag")
        assert time.monotonic() - t0 < 30
    finally:
        proxy.stop()


def test_object_replaced_while_open(moto, bucket, env, tmp_path):
    client = s3_client(moto.url)
    expected = put_bag(tmp_path, client, bucket, "v.bag")
    env.setenv("AWS_ENDPOINT_URL", moto.url)
    r = bag.Reader(f"s3://{bucket}/v.bag")
    assert r[0] == expected[0]
    put_bag(tmp_path, client, bucket, "v.bag", [b"new"] * N)
    with pytest.raises(a2pack.errors.IoError, match=rf"s3://{bucket}/v\.bag: the object changed"):
        r[1]
    # Reopened, the new version reads.
    assert bag.Reader(f"s3://{bucket}/v.bag")[1] == b"new"


# ---------------------------------------------------------------- writers

def uploads(client, bucket):
    return client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def keys(client, bucket):
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_writer_killed_mid_upload_leaves_no_object(moto, bucket, env, tmp_path):
    client = s3_client(moto.url)
    # Parts are held back by the proxy, so the kill lands mid-upload.
    proxy = ss.FaultProxy(moto.url, lambda n, m, path, h: "delay:30" if "partNumber" in path else None)
    try:
        env.setenv("AWS_ENDPOINT_URL", proxy.url)
        script = textwrap.dedent(f"""
            import os
            from a2pack import bag
            with bag.Writer("s3://{bucket}/killed.bag") as w:
                for _ in range(12):
                    w.write(os.urandom(1 << 20))
        """)
        child = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ))
        deadline = time.monotonic() + 60
        while not any("partNumber" in p for _, p in proxy.log):
            assert child.poll() is None, "the writer finished before it was killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child.kill()
        child.wait()
        assert "killed.bag" not in keys(client, bucket)
        with pytest.raises(a2pack.errors.NotFoundError):
            bag.Reader(f"s3://{bucket}/killed.bag")
    finally:
        proxy.stop()


def test_failed_upload_is_aborted(moto, bucket, env, tmp_path):
    client = s3_client(moto.url)
    proxy = ss.FaultProxy(moto.url, lambda n, m, path, h: "status:400" if "partNumber=2" in path else None)
    try:
        env.setenv("AWS_ENDPOINT_URL", proxy.url)
        with pytest.raises(a2pack.errors.IoError, match=rf"s3://{bucket}/failed\.bag.*part 2.*HTTP 400"):
            with bag.Writer(f"s3://{bucket}/failed.bag") as w:
                for _ in range(12):
                    w.write(os.urandom(1 << 20))
        assert "failed.bag" not in keys(client, bucket)
        assert uploads(client, bucket) == []  # the multipart upload was aborted
        assert any(m == "DELETE" and "uploadId" in p for m, p in proxy.log)
    finally:
        proxy.stop()


def test_abandoned_writer_uploads_nothing(moto, bucket, env, tmp_path):
    client = s3_client(moto.url)
    env.setenv("AWS_ENDPOINT_URL", moto.url)
    with pytest.raises(RuntimeError):
        with bag.Writer(f"s3://{bucket}/abandoned.bag") as w:
            w.write(b"x" * 1000)
            raise RuntimeError("caller failed")
    assert "abandoned.bag" not in keys(client, bucket)
    assert uploads(client, bucket) == []


# ---------------------------------------------------------------- credentials

@pytest.fixture(scope="module")
def auth_moto():
    """moto enforcing IAM: the first 4 requests set up a user, its key, its
    policy and a bucket; every later request must carry a valid signature."""
    s = ss.start_moto(auth_after=4)
    iam = boto3.client("iam", endpoint_url=s.url, region_name="us-east-1",
                       aws_access_key_id="x", aws_secret_access_key="x")
    iam.create_user(UserName="u")
    key = iam.create_access_key(UserName="u")["AccessKey"]
    iam.put_user_policy(UserName="u", PolicyName="all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    s3_client(s.url, key["AccessKeyId"], key["SecretAccessKey"]).create_bucket(Bucket="auth")
    yield s, key["AccessKeyId"], key["SecretAccessKey"]
    s.stop()


def test_credentials(auth_moto, env, tmp_path):
    server, key_id, secret = auth_moto
    env.setenv("AWS_ENDPOINT_URL", server.url)
    env.setenv("AWS_ACCESS_KEY_ID", key_id)
    env.setenv("AWS_SECRET_ACCESS_KEY", secret)
    data = [b"a", b"bb", b""]
    with bag.Writer("s3://auth/ok.bag") as w:  # signed requests are accepted
        for x in data:
            w.write(x)
    assert list(bag.Reader("s3://auth/ok.bag")) == data

    # A profile of a credentials file (AWS_PROFILE) instead of variables.
    creds = tmp_path / "credentials"
    creds.write_text(f"[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n"
                     f"[prof]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n")
    env.delenv("AWS_ACCESS_KEY_ID")
    env.delenv("AWS_SECRET_ACCESS_KEY")
    env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    env.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    env.setenv("AWS_PROFILE", "prof")
    assert list(bag.Reader("s3://auth/ok.bag")) == data

    # Wrong secret: refused, named, no retry loop.
    env.setenv("AWS_PROFILE", "default")
    with pytest.raises(a2pack.errors.IoError, match=r"s3://auth/ok\.bag.*HTTP 403"):
        bag.Reader("s3://auth/ok.bag")
    env.setenv("AWS_ACCESS_KEY_ID", key_id)
    env.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(a2pack.errors.IoError, match=r"s3://auth/ok\.bag.*HTTP 403.*credentials from AWS_ACCESS_KEY_ID"):
        bag.Reader("s3://auth/ok.bag")

    # No credentials anywhere: sent unsigned, refused, and the message says so.
    env.delenv("AWS_ACCESS_KEY_ID")
    env.delenv("AWS_SECRET_ACCESS_KEY")
    env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with pytest.raises(a2pack.errors.IoError, match=r"no AWS credentials were found"):
        bag.Reader("s3://auth/ok.bag")


# ---------------------------------------------------------------- hostile servers

@pytest.mark.parametrize("action", ["bad-range", "short-body", "huge-length"])
def test_hostile_server(moto, bucket, env, tmp_path, action):
    expected = put_bag(tmp_path, s3_client(moto.url), bucket, "h.bag")
    state = {"on": False}
    proxy = ss.FaultProxy(moto.url, lambda n, m, p, h: action if state["on"] and m == "GET" else None)
    try:
        env.setenv("AWS_ENDPOINT_URL", proxy.url)
        env.setenv("A2PACK_STORAGE_RETRIES", "1")
        r = bag.Reader(f"s3://{bucket}/h.bag", bag.Reader.Options(access_pattern=bag.AccessPattern.RANDOM))
        assert r[0] == expected[0]
        state["on"] = True
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with pytest.raises(a2pack.errors.IoError, match=rf"s3://{bucket}/h\.bag"):
            r[7]
        # Nothing was sized by the declared 2**50 bytes.
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 256 << 10  # KiB
    finally:
        proxy.stop()


def test_hostile_object_size(moto, bucket, env, tmp_path):
    put_bag(tmp_path, s3_client(moto.url), bucket, "size.bag")
    proxy = ss.FaultProxy(moto.url, lambda n, m, p, h: "huge-length" if m == "HEAD" else None)
    try:
        env.setenv("AWS_ENDPOINT_URL", proxy.url)
        env.setenv("A2PACK_STORAGE_RETRIES", "1")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with pytest.raises(a2pack.errors.Error, match=rf"s3://{bucket}/size\.bag"):
            bag.Reader(f"s3://{bucket}/size.bag")
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 256 << 10
    finally:
        proxy.stop()


# ---------------------------------------------------------------- GCS credentials

def _b64url_decode(s: str) -> bytes:
    import base64
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class TokenServer:
    """A Google OAuth token endpoint and GCE metadata server on 127.0.0.1:
    checks the service-account JWT's RS256 signature and claims."""

    def __init__(self, public_key):
        import http.server
        import threading
        from urllib.parse import parse_qs
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        self.calls = []
        server = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                jwt = form["assertion"][0]
                head, claims, sig = jwt.split(".")
                try:
                    public_key.verify(_b64url_decode(sig), f"{head}.{claims}".encode(),
                                      padding.PKCS1v15(), hashes.SHA256())
                except Exception:
                    return self.reply(400, {"error": "invalid_grant"})
                c = json.loads(_b64url_decode(claims))
                server.calls.append(("jwt", form["grant_type"][0], c))
                self.reply(200, {"access_token": "tok-sa", "expires_in": 3600})

            def do_GET(self):
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self.reply(403, {})
                server.calls.append(("metadata", self.path))
                self.reply(200, {"access_token": "tok-md", "expires_in": 3600})

        self.port = ss.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()

    def stop(self):
        self._srv.shutdown()
        self._srv.server_close()


def test_gcs_credentials(env, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    tokens = TokenServer(key.public_key())
    gcs = ss.start_gcs()
    want = {"token": None}
    # The proxy plays a GCS that refuses requests without the expected token.
    proxy = ss.FaultProxy(gcs.url, lambda n, m, p, h: None
                          if h.get("Authorization") == f"Bearer {want['token']}" else "status:401")
    try:
        ss.gcs_create_bucket(gcs.url, "sa")
        env.delenv("STORAGE_EMULATOR_HOST", raising=False)
        env.setenv("A2PACK_GCS_ENDPOINT", proxy.url)
        env.setenv("A2PACK_STORAGE_RETRIES", "1")
        # A service-account key: JWT -> token, cached across requests.
        sa = tmp_path / "sa.json"
        sa.write_text(json.dumps({
            "type": "service_account", "client_email": "svc@proj.iam.gserviceaccount.com",
            "private_key": key.private_bytes(serialization.Encoding.PEM,
                                             serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()).decode(),
            "token_uri": tokens.url + "/token"}))
        env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(sa))
        want["token"] = "tok-sa"
        data = [b"x" * 100, b"", b"yz"]
        with bag.Writer("gs://sa/a.bag") as w:
            for x in data:
                w.write(x)
        assert list(bag.Reader("gs://sa/a.bag")) == data
        jwt_calls = [c for c in tokens.calls if c[0] == "jwt"]
        assert len(jwt_calls) == 1
        _, grant, claims = jwt_calls[0]
        assert grant == "urn:ietf:params:oauth:grant-type:jwt-bearer"
        assert claims["iss"] == "svc@proj.iam.gserviceaccount.com"
        assert claims["aud"] == tokens.url + "/token" and "devstorage" in claims["scope"]

        # No key file: the metadata server's token.
        env.delenv("GOOGLE_APPLICATION_CREDENTIALS")
        env.setenv("GCE_METADATA_HOST", f"127.0.0.1:{tokens.port}")
        want["token"] = "tok-md"
        assert list(bag.Reader("gs://sa/a.bag")) == data
        assert any(c[0] == "metadata" for c in tokens.calls)

        # Neither (no metadata server answers): anonymous, refused, and said so.
        env.setenv("GCE_METADATA_HOST", f"127.0.0.1:{ss.free_port()}")
        with pytest.raises(a2pack.errors.IoError, match=r"gs://sa/a\.bag.*HTTP 401.*anonymous"):
            bag.Reader("gs://sa/a.bag")
        # A key file that is not one: named.
        sa.write_text("{}")
        env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(sa))
        with pytest.raises(a2pack.errors.Error, match=str(sa)):
            bag.Reader("gs://sa/a.bag")
    finally:
        proxy.stop()
        gcs.stop()
        tokens.stop()
