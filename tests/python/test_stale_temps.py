"""Killed writers leave no garbage: a SIGKILLed `a2pack
pack`, `a2pack bag write` or Python bag.Writer leaves OUT.tmp-PID-N; the next
writer to the same output removes it, and so does `a2pack clean` - but never a
temporary whose writer is alive, nor a file that only looks like one."""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import a2pack
from a2pack import bag
from a2pack.run import Meta


from cli_util import CLI


def temps(folder: pathlib.Path, name: str):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(name + ".tmp-"))


def wait_for(pred, what, proc=None):
    # Polls for a state the child reaches by itself; a bound only so that a
    # broken child fails the test instead of hanging it.
    for _ in range(6000):
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"child exited ({proc.returncode}) before {what}")
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


CHILD_WRITER = textwrap.dedent("""
    import sys, time
    from a2pack import bag
    w = bag.Writer(sys.argv[1], bag.Writer.Options(limits_placement=getattr(
        bag.LimitsPlacement, sys.argv[2])))
    for i in range(2000):
        w.write(b"record %d " % i * 50)
    w.flush()
    print("ready", flush=True)
    time.sleep(600)
""")


def start_python_writer(out, placement="TAIL"):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(pathlib.Path(a2pack.__file__).parents[1]),
                                                    env.get("PYTHONPATH", "")] if p)
    proc = subprocess.Popen([sys.executable, "-c", CHILD_WRITER, str(out), placement],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("placement", ["TAIL", "SEPARATE"])
def test_python_writer_killed_then_next_writer_cleans(tmp_path, placement):
    out = tmp_path / "data.bagz"
    proc = start_python_writer(out, placement)
    left = temps(tmp_path, "data.bagz") + temps(tmp_path, "limits.data.bagz")
    assert left and all(f".tmp-{proc.pid}-" in n for n in left)
    # While the writer lives its temporaries are kept, by writers and by clean.
    with bag.Writer(str(tmp_path / "other.bagz")) as w:
        w.write(b"x")
    r = subprocess.run([str(CLI), "clean", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert temps(tmp_path, "data.bagz") + temps(tmp_path, "limits.data.bagz") == left
    kill(proc)
    assert temps(tmp_path, "data.bagz") + temps(tmp_path, "limits.data.bagz") == left
    # Not a writer's temporary: never touched.
    lookalikes = ["data.bagz.tmp-1", "data.bagz.tmp-x-1", "data.bagz.tmp-99999999-1-x", "data.bagz.tmp"]
    for n in lookalikes:
        (tmp_path / n).write_bytes(b"keep")
    opts = bag.Writer.Options(limits_placement=getattr(bag.LimitsPlacement, placement))
    with bag.Writer(str(out), opts) as w:
        w.write(b"fresh")
    assert temps(tmp_path, "data.bagz") == sorted(lookalikes[:3])
    assert (tmp_path / "data.bagz.tmp").exists()
    assert temps(tmp_path, "limits.data.bagz") == []
    assert list(bag.Reader(str(out), bag.Reader.Options(
        limits_placement=getattr(bag.LimitsPlacement, placement)))) == [b"fresh"]


def test_cli_bag_write_killed_then_clean(tmp_path):
    fifo = tmp_path / "blocked.bin"
    os.mkfifo(fifo)
    (tmp_path / "a.bin").write_bytes(b"a" * 1000)
    out = tmp_path / "w.bag"
    # The second input is a FIFO nobody writes: the writer blocks on it with
    # its temporary open, and is killed there.
    proc = subprocess.Popen([str(CLI), "bag", "write", str(out), str(tmp_path / "a.bin"), str(fifo)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: temps(tmp_path, "w.bag"), "the temporary", proc)
    kill(proc)
    left = temps(tmp_path, "w.bag")
    assert len(left) == 1 and f".tmp-{proc.pid}-" in left[0]
    r = subprocess.run([str(CLI), "clean", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert left[0] in r.stderr and "1 stale temporary removed" in r.stderr
    assert temps(tmp_path, "w.bag") == [] and not out.exists()
    assert fifo.exists() and (tmp_path / "a.bin").exists()


def _runs(folder: pathlib.Path, n: int):
    folder.mkdir()
    rng = np.random.default_rng(1)
    for i in range(n):
        k = 200
        r = a2pack.RunV2.from_arrays(
            Meta(k, 1_700_000_000, 1.0, 10, 2048, None),
            rng.integers(0, 2**60, k, dtype=np.uint64), rng.integers(0, 4, k, dtype=np.uint8),
            rng.random((k, 4), dtype=np.float32), np.full(k, 0xF, np.uint8), None, final_board=i)
        (folder / f"r{i:05d}.a2run2").write_bytes(r.to_bytes())


def test_cli_pack_killed_then_next_pack_cleans(tmp_path):
    _runs(tmp_path / "runs", 400)
    out = tmp_path / "p.a2pack"
    # SIGSTOP as soon as the temporary appears (pack creates it before it
    # reads the runs), then SIGKILL: the kill lands mid-write every time.
    proc = subprocess.Popen([str(CLI), "pack", "--input", str(tmp_path / "runs"), "--output", str(out),
                             "-j", "1", "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = []

    def temp_or_done():
        seen[:] = temps(tmp_path, "p.a2pack")
        if seen:
            proc.send_signal(signal.SIGSTOP)
        return bool(seen) or proc.poll() is not None

    wait_for(temp_or_done, "the temporary")
    if not seen:
        pytest.skip("pack finished before its temporary could be seen")
    kill(proc)
    assert temps(tmp_path, "p.a2pack") == seen and not out.exists()
    r = subprocess.run([str(CLI), "pack", "--input", str(tmp_path / "runs"), "--output", str(out),
                        "--no-progress"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert temps(tmp_path, "p.a2pack") == [] and len(a2pack.PackReader(out)) == 400
