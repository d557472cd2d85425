"""Credentials never appear in storage errors. Against servers on 127.0.0.1:
an endpoint URL with a password (AWS_ENDPOINT_URL=http://user:PASS@host), a
server that refuses every request and echoes what it was sent (the URL, the
Authorization header, the session token, a GCS bearer token) in its error
body, and a port where nothing listens. Every failing operation, from Python
and from the CLI, still names the object and the HTTP status, and prints none
of the password, the access key id, the secret, the session token, the
signature or the bearer token. A password in the endpoint does not break
signed requests either."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import threading
from xml.sax.saxutils import escape

import pytest

import a2pack
from a2pack import bag

import storage_servers as ss

PASSWORD = "url-password-Zq81"
KEY_ID = "AKIAKEYIDOFTHETEST01"
SECRET = "secret-access-key-of-the-test/9f8e7d6c5b4a"
SESSION = "session-token-of-the-test+FwoGZXIvYXdzEJr"
BEARER = "ya29.bearer-token-of-the-test"
SECRETS = [PASSWORD, KEY_ID, SECRET, SESSION, BEARER]


def assert_clean(text: str) -> None:
    for s in SECRETS:
        assert s not in text, f"{s!r} printed in: {text}"
    assert not re.search(r"Signature=[0-9a-f]", text), f"a signature printed in: {text}"


class EchoServer:
    """Refuses every request with 403 and a body quoting the request: its
    method, URL and every header (Authorization, x-amz-security-token...),
    as an S3 XML error and, for JSON clients, a GCS error. GET of the GCE
    metadata token path answers a token instead."""

    def __init__(self):
        server = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                server.requests.append((self.command, self.path, dict(self.headers)))
                if self.path.startswith("/computeMetadata/"):
                    return self._reply(200, json.dumps(
                        {"access_token": BEARER, "expires_in": 3600}).encode(), "application/json")
                echo = f"{self.command} {self.path}\n" + "".join(
                    f"{k}: {v}\n" for k, v in self.headers.items())
                if self.path.startswith(("/storage/", "/upload/storage/")):
                    body = json.dumps({"error": {"code": 403, "message": f"denied: {echo}"}})
                    return self._reply(403, body.encode(), "application/json")
                body = (f"<Error><Code>AccessDenied</Code><Message>denied: {escape(echo)}"
                        f"</Message></Error>")
                self._reply(403, body.encode(), "application/xml")

            def _reply(self, code, body, ctype):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.requests = []
        self.port = ss.free_port()
        self._srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self._srv.daemon_threads = True
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()

    def stop(self):
        self._srv.shutdown()
        self._srv.server_close()


@pytest.fixture(scope="module")
def echo():
    s = EchoServer()
    yield s
    s.stop()


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("A2PACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("A2PACK_STORAGE_TIMEOUT", "5")
    monkeypatch.setenv("A2PACK_STORAGE_CONNECT_TIMEOUT", "1")
    monkeypatch.setenv("A2PACK_STORAGE_RETRIES", "0")
    return monkeypatch


def write_small_bag(path):
    with bag.Writer(path) as w:
        w.write(b"abc")


# Each: a Python operation on an object under `base` ("s3://b" or "gs://b").
PY_OPS = {
    "bag reader": lambda base: bag.Reader(f"{base}/r.bag"),
    "bag writer": lambda base: write_small_bag(f"{base}/w.bag"),
    "sharded bag reader": lambda base: bag.Reader(f"{base}/s@2.bag"),
    "pack reader": lambda base: a2pack.PackReader.open(f"{base}/p.a2pack"),
    "dataset": lambda base: a2pack.Dataset(f"{base}/ds"),
}

CLI_OPS = {
    "bag info": lambda base: ["bag", "info", f"{base}/r.bag"],
    "validate": lambda base: ["validate", "--packfile", f"{base}/p.a2pack"],
    "dataset stats": lambda base: ["dataset", "stats", "-d", f"{base}/ds"],
}


def run_cli(args):
    exe = os.environ.get("A2PACK_CLI")
    if not exe or not os.path.exists(exe):
        pytest.skip("a2pack CLI not found (set A2PACK_CLI)")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))


@pytest.mark.parametrize("op", sorted(PY_OPS))
def test_s3_errors_hide_the_endpoint_password_and_echoed_credentials(echo, env, op):
    env.setenv("AWS_ENDPOINT_URL", f"http://user:{PASSWORD}@127.0.0.1:{echo.port}")
    with pytest.raises(a2pack.errors.Error) as e:
        PY_OPS[op]("s3://b")
    msg = str(e.value)
    assert_clean(msg)
    assert "s3://b/" in msg and "HTTP 403" in msg, msg


@pytest.mark.parametrize("op", sorted(CLI_OPS))
def test_s3_cli_errors_hide_the_endpoint_password_and_echoed_credentials(echo, env, op):
    env.setenv("AWS_ENDPOINT_URL", f"http://user:{PASSWORD}@127.0.0.1:{echo.port}")
    r = run_cli(CLI_OPS[op]("s3://b"))
    assert r.returncode != 0
    assert_clean(r.stdout + r.stderr)
    assert "s3://b/" in r.stderr and "HTTP 403" in r.stderr, r.stderr


def test_an_echoed_authorization_header_is_hidden_but_the_servers_words_stay(echo, env):
    env.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{echo.port}")
    with pytest.raises(a2pack.errors.IoError) as e:
        write_small_bag("s3://b/echo.bag")  # a PUT: the server's body is quoted
    msg = str(e.value)
    # The request did carry the credentials the server echoed...
    sent = [h for m, p, h in echo.requests if m == "PUT" and p.startswith("/b/echo.bag")]
    assert sent and KEY_ID in sent[-1]["Authorization"] and sent[-1]["x-amz-security-token"] == SESSION
    # ... and the message keeps what the server said, not them.
    assert "AccessDenied" in msg and "denied: PUT /b/echo.bag" in msg, msg
    assert "Authorization: ***" in msg and "x-amz-security-token: ***" in msg, msg
    assert_clean(msg)


def test_unreachable_endpoint_names_the_url_without_its_password(env):
    port = ss.free_port()  # nothing listens there
    env.setenv("AWS_ENDPOINT_URL", f"http://user:{PASSWORD}@127.0.0.1:{port}")
    for op in sorted(PY_OPS):
        with pytest.raises(a2pack.errors.IoError) as e:
            PY_OPS[op]("s3://b")
        msg = str(e.value)
        assert_clean(msg)
        assert f"http://127.0.0.1:{port}/b" in msg, msg
    r = run_cli(CLI_OPS["bag info"]("s3://b"))
    assert r.returncode != 0 and f"http://127.0.0.1:{port}/b/" in r.stderr
    assert_clean(r.stdout + r.stderr)


@pytest.mark.parametrize("op", ["bag reader", "bag writer", "pack reader"])
def test_gcs_errors_hide_the_bearer_token_and_the_endpoint_password(echo, env, op):
    env.delenv("STORAGE_EMULATOR_HOST", raising=False)
    env.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    env.setenv("A2PACK_GCS_ENDPOINT", f"http://user:{PASSWORD}@127.0.0.1:{echo.port}")
    env.setenv("GCE_METADATA_HOST", f"127.0.0.1:{echo.port}")  # hands out BEARER
    with pytest.raises(a2pack.errors.IoError) as e:
        PY_OPS[op]("gs://b")
    msg = str(e.value)
    sent = [h for m, p, h in echo.requests if p.startswith(("/storage/", "/upload/"))]
    assert sent and sent[-1]["Authorization"] == f"Bearer {BEARER}"
    assert_clean(msg)
    assert "gs://b/" in msg and "HTTP 403" in msg, msg


# ---------------------------------------------------------------- signed requests

@pytest.fixture(scope="module")
def auth_moto():
    """moto checking every signature after setting up a user and a bucket."""
    boto3 = pytest.importorskip("boto3")
    s = ss.start_moto(auth_after=4)
    iam = boto3.client("iam", endpoint_url=s.url, region_name="us-east-1",
                       aws_access_key_id="x", aws_secret_access_key="x")
    iam.create_user(UserName="u")
    key = iam.create_access_key(UserName="u")["AccessKey"]
    iam.put_user_policy(UserName="u", PolicyName="all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    boto3.client("s3", endpoint_url=s.url, region_name="us-east-1",
                 aws_access_key_id=key["AccessKeyId"],
                 aws_secret_access_key=key["SecretAccessKey"]).create_bucket(Bucket="signed")
    yield s, key["AccessKeyId"], key["SecretAccessKey"]
    s.stop()


def test_signed_requests_work_with_a_password_in_the_endpoint(auth_moto, env):
    server, key_id, secret = auth_moto
    env.setenv("AWS_ACCESS_KEY_ID", key_id)
    env.setenv("AWS_SECRET_ACCESS_KEY", secret)
    env.delenv("AWS_SESSION_TOKEN")
    env.setenv("AWS_ENDPOINT_URL", f"http://user:{PASSWORD}@127.0.0.1:{server.port}")
    # The signature covers the Host header sent, which has no user info.
    write_small_bag("s3://signed/ok.bag")
    assert list(bag.Reader("s3://signed/ok.bag")) == [b"abc"]
    # Refused with a wrong secret: named, and the password is not printed.
    env.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-key-at-all")
    with pytest.raises(a2pack.errors.IoError, match=r"s3://signed/ok\.bag.*HTTP 403") as e:
        list(bag.Reader("s3://signed/ok.bag"))
    assert_clean(str(e.value))
    assert "not-the-secret-key-at-all" not in str(e.value)
