"""Object-storage servers on 127.0.0.1 for the test_storage_* suites.

Real peers, started by the tests and stopped after: moto's S3 server
(`moto[server]`) and gcp-storage-emulator's GCS JSON API, each a child
process on a free port; plus FaultProxy, a small HTTP proxy put in front of
either to inject 500s, dropped connections, delays and hostile responses
(wrong Content-Range, short bodies, huge declared lengths). Also the run
folders the pack and export tests upload (make_runs).
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Callable, Optional

VENV_BIN = os.path.dirname(sys.executable)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, proc: subprocess.Popen, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before answering")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except urllib.error.HTTPError:
            return  # it answers (an S3 server refuses an unsigned GET /)
        except Exception:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} did not answer at {url} within {timeout} s")


def _die_with_parent() -> None:
    # A server outlives nothing: when the test process dies (a crash, a
    # timeout's kill), Linux sends the server SIGKILL.
    import ctypes
    import signal
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Server:
    """A child-process server; stop() kills it (idempotent)."""

    def __init__(self, argv, port: int, health: str, what: str, env=None):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=env, preexec_fn=_die_with_parent)
        _wait_for(self.url + health, self.proc, what)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def start_moto(auth_after: Optional[int] = None) -> Server:
    """moto's S3 server. With auth_after=N, requests after the first N are
    authenticated against moto's IAM (signatures checked)."""
    port = free_port()
    env = dict(os.environ)
    if auth_after is not None:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(auth_after)
    return Server([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                  port, "/moto-api/", "moto server", env)


def find_versitygw() -> Optional[str]:
    """The Versity S3 Gateway's binary: $A2PACK_VERSITYGW, the project's
    .tools/bin (`make bench-tools`), else PATH; None when there is none."""
    import shutil
    here = pathlib.Path(__file__).resolve().parents[2] / ".tools" / "bin" / "versitygw"
    for cand in (os.environ.get("A2PACK_VERSITYGW"), str(here), shutil.which("versitygw")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def start_versitygw(root: str, access: str, secret: str, binary: Optional[str] = None,
                    posix_options=()) -> Server:
    """The Versity S3 Gateway (a production S3 server, Apache-2.0) over the
    local folder `root` (its POSIX backend: a bucket is a folder, an object a
    file), single account `access`/`secret` (SigV4 checked). `posix_options`
    go to its posix backend (e.g. ["--io-buffer-size", "65536"])."""
    exe = binary or find_versitygw()
    if not exe:
        raise RuntimeError("versitygw not found (make storage-tools, or A2PACK_VERSITYGW)")
    port = free_port()
    return Server([exe, "--access", access, "--secret", secret, "--port", f"127.0.0.1:{port}",
                   "posix", *posix_options, root], port, "/", "versitygw")


def start_gcs() -> Server:
    port = free_port()
    exe = os.path.join(VENV_BIN, "gcp-storage-emulator")
    argv = [exe] if os.path.exists(exe) else [sys.executable, "-m", "gcp_storage_emulator"]
    return Server(argv + ["start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"],
                  port, "/", "gcp-storage-emulator")


def gcs_create_bucket(base_url: str, name: str) -> None:
    req = urllib.request.Request(f"{base_url}/storage/v1/b?project=test",
                                 data=json.dumps({"name": name}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(req, timeout=10).read()


def gcs_get(base_url: str, bucket: str, name: str) -> Optional[bytes]:
    """The object's bytes, or None when it does not exist."""
    from urllib.parse import quote
    try:
        return urllib.request.urlopen(
            f"{base_url}/storage/v1/b/{bucket}/o/{quote(name, safe='')}?alt=media", timeout=10).read()
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def gcs_put(base_url: str, bucket: str, name: str, data: bytes) -> None:
    from urllib.parse import quote
    req = urllib.request.Request(
        f"{base_url}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(name, safe='')}",
        data=data, headers={"Content-Type": "application/octet-stream"}, method="POST")
    urllib.request.urlopen(req, timeout=10).read()


# ---------------------------------------------------------------- fault proxy

class FaultProxy:
    """An HTTP/1.1 reverse proxy to `upstream` on a free port.

    `rule(n, method, path, headers)` is asked for every request (n counts
    from 0) and returns None (forward as is) or an action:
      "500"            answer 500 without forwarding
      "drop"           close the connection without answering
      "drop-mid-body"  forward, send the headers and half the body, then close
      "delay:S"        wait S seconds, then forward
      "bad-range"      forward, then shift the Content-Range start by one
      "short-body"     forward, then send a smaller Content-Length and body
                       (the Content-Range unchanged)
      "huge-length"    forward, then declare Content-Length 2**50 (and the
                       same size in Content-Range / HEAD) and close after the body
      "status:N"       answer N without forwarding
    `log` records (method, path) of every request seen.
    """

    def __init__(self, upstream: str, rule: Optional[Callable] = None):
        self.upstream = upstream.replace("http://", "")
        self.rule = rule or (lambda *a: None)
        self.log = []
        self.count = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _handle(self):
                with proxy._lock:
                    n = proxy.count
                    proxy.count += 1
                    proxy.log.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                action = proxy.rule(n, self.command, self.path, self.headers)
                if action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if action == "500" or (action or "").startswith("status:"):
                    code = 500 if action == "500" else int(action.split(":")[1])
                    msg = b"<Error><Code>InjectedFault</Code><Message>injected</Message></Error>"
                    self.send_response(code)
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(msg)
                    return
                if action and action.startswith("delay:"):
                    time.sleep(float(action.split(":")[1]))
                conn = http.client.HTTPConnection(proxy.upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items()}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read() if self.command != "HEAD" else b""
                rheaders = [(k, v) for k, v in resp.getheaders()
                            if k.lower() not in ("content-length", "transfer-encoding", "connection")]
                conn.close()
                declared = int(resp.getheader("Content-Length") or len(data))
                if action == "bad-range":
                    rheaders = [(k, _shift_range(v) if k.lower() == "content-range" else v)
                                for k, v in rheaders]
                if action == "short-body" and len(data) > 1:
                    data = data[: len(data) // 2]
                    declared = len(data)
                if action == "huge-length":
                    declared = 2 ** 50
                    rheaders = [(k, _huge_range(v) if k.lower() == "content-range" else v)
                                for k, v in rheaders]
                self.send_response(resp.status)
                for k, v in rheaders:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(declared))
                self.end_headers()
                if action == "drop-mid-body":
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if self.command != "HEAD":
                    self.wfile.write(data)
                if action == "huge-length":
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _shift_range(v: str) -> str:
    # "bytes a-b/total" -> "bytes (a+1)-(b+1)/total"
    unit, rest = v.split(" ", 1)
    span, total = rest.split("/")
    a, b = (int(x) for x in span.split("-"))
    return f"{unit} {a + 1}-{b + 1}/{total}"


def _huge_range(v: str) -> str:
    unit, rest = v.split(" ", 1)
    span, _ = rest.split("/")
    return f"{unit} {span}/{2 ** 50}"


def refuse_nth_put(n: int) -> Callable:
    """A FaultProxy rule answering the n-th PUT (an upload's n-th part or
    chunk) with 403, passing everything else through."""
    seen = {"puts": 0}

    def rule(_k, method, _path, _headers):
        if method != "PUT":
            return None
        seen["puts"] += 1
        return "status:403" if seen["puts"] == n else None

    return rule


def make_runs(folder: pathlib.Path, n: int = 12, scale: int = 1, first: int = 40,
              growth: int = 30) -> None:
    """n run files (v2, branches on every step), run i of
    (first + growth * i) * scale steps, written into folder."""
    import numpy as np

    import a2pack
    from a2pack.run import Meta

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        rng = np.random.default_rng(i)
        k = (first + growth * i) * scale
        meta = Meta(steps=k, start_unix_s=1_700_000_000 + i, elapsed_s=1.0, max_score=10 * i,
                    highest_tile=512, engine_str=None)
        boards = rng.integers(0, 2**63, size=k, dtype=np.uint64)
        moves = rng.integers(0, 4, size=k, dtype=np.uint8)
        values = rng.random((k, 4), dtype=np.float32)
        legal = np.full(k, 0xF, np.uint8)
        run = a2pack.RunV2.from_arrays(meta, boards, moves, values, legal, final_board=i)
        (folder / f"run-{i:03d}.a2run2").write_bytes(run.to_bytes("v2"))
