"""Files cut short under a reader's mapping: another process truncating a
mapped steps.npy, .bag, .bagz or packfile (or rewriting it in place, as
np.save does) makes the library's next read raise an error naming the file,
where it used to end the process with SIGBUS. A SIGBUS that is not the
library's own (raised by the program, or from a mapping a2pack did not
make) still ends the process, as does a fault in a view the user holds.

Every case runs in a child process, so a regression shows as a signal
death of that child rather than a crashed test run."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import a2pack
from a2pack import bag
from test_dataset import make_run, write_runs

# What every child starts with: `report(fn)` prints how fn() ended as JSON.
PRELUDE = """
import json, os, sys
import numpy as np
import a2pack
from a2pack import bag

def report(fn):
    try:
        fn()
        print(json.dumps({"error": None}), flush=True)
    except Exception as e:
        print(json.dumps({"error": type(e).__name__, "message": str(e),
                          "status": getattr(e, "status", None)}), flush=True)
"""


def run_child(code, *args, python_flags=()):
    p = subprocess.run([sys.executable, *python_flags, "-c", PRELUDE + textwrap.dedent(code),
                        *map(str, args)], capture_output=True, text=True, timeout=120)
    return p


def reports(p):
    assert p.returncode == 0, (p.returncode, p.stderr[-3000:])
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def assert_shrank(r, path):
    assert r["error"] == "CorruptError", r
    assert r["status"] == a2pack.errors.CorruptError.status
    assert str(path) in r["message"] and "shrank" in r["message"], r["message"]


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    # 8 000 rows (256 KB of steps.npy): many pages past a cut at 4 KiB.
    d = tmp_path_factory.mktemp("trunc")
    write_runs(d / "runs", [make_run(s, 2000) for s in range(4)])
    a2pack.build_dataset(d / "runs", d / "ds", workers=2)
    return d / "ds"


@pytest.fixture
def ds_copy(dataset_dir, tmp_path):
    """A fresh copy for one test to cut short."""
    out = tmp_path / "ds"
    out.mkdir()
    for name in os.listdir(dataset_dir):
        (out / name).write_bytes((dataset_dir / name).read_bytes())
    return out


def test_dataset_gathers_raise_naming_steps_npy(ds_copy):
    steps = ds_copy / "steps.npy"
    p = run_child("""
        ds = a2pack.Dataset(sys.argv[1], mmap=True)
        n = len(ds)
        report(lambda: ds.get_batch(np.arange(n - 10, n)))          # before: reads
        os.truncate(sys.argv[2], 4096)
        tail = np.arange(n - 100, n)
        report(lambda: ds.get_batch(tail))                           # one thread
        report(lambda: ds.get_batch(np.arange(n - 4096, n), workers=2))  # split over threads
        report(lambda: ds.get_batch_columns(tail))
        report(lambda: ds.get_batch_columns(np.arange(n - 4096, n), workers=2))
        report(lambda: ds.get_batch(np.arange(0, 10)))               # rows still in the file
        report(lambda: ds.stats())
    """, ds_copy, steps)
    before, *cut, head, stats = reports(p)
    assert before["error"] is None
    for r in cut:
        assert_shrank(r, steps)
        assert "4096 bytes" in r["message"]
    assert head["error"] is None
    assert_shrank(stats, steps)


def test_dataset_rewritten_in_place_with_np_save(ds_copy):
    steps = ds_copy / "steps.npy"
    p = run_child("""
        ds = a2pack.Dataset(sys.argv[1], mmap=True)
        n = len(ds)
        small = np.load(sys.argv[2])[:100]
        np.save(sys.argv[2], small)     # the same file, truncated and written again
        report(lambda: ds.get_batch(np.arange(n - 10, n)))
    """, ds_copy, steps)
    (r,) = reports(p)
    assert_shrank(r, steps)


def test_feed_over_a_mapped_dataset_raises_at_next(ds_copy):
    steps = ds_copy / "steps.npy"
    p = run_child("""
        ds = a2pack.Dataset(sys.argv[1], mmap=True)
        feed = a2pack.Feed(ds, batch_size=512, seed=1, threads=2, depth=2, epochs=1)
        it = iter(feed)
        b = next(it)
        del b
        os.truncate(sys.argv[2], 4096)
        def drain():
            for b in it:
                pass
        report(drain)
        feed.close()
    """, ds_copy, steps)
    (r,) = reports(p)
    assert_shrank(r, steps)


def test_the_steps_view_is_the_users_and_still_faults(ds_copy):
    # Documented: a numpy view over the mapping is read by numpy, not by
    # a2pack; reading it past a new end of the file ends the process.
    p = run_child("""
        ds = a2pack.Dataset(sys.argv[1], mmap=True)
        v = ds.steps
        os.truncate(sys.argv[2], 4096)
        print(int(v[-1]["board"]))
    """, ds_copy, ds_copy / "steps.npy")
    assert p.returncode == -signal.SIGBUS, (p.returncode, p.stderr[-2000:])


def write_bag(path, n=600, size=200):
    rng = np.random.default_rng(1)
    with bag.Writer(path) as w:
        for i in range(n):
            w.write(rng.integers(0, 256, size, dtype=np.uint8).tobytes())


@pytest.mark.parametrize("name", ["r.bag", "r.bagz"])
@pytest.mark.parametrize("limits", ["ON_DISK", "IN_MEMORY"])
def test_bag_reader_raises_naming_the_file(tmp_path, name, limits):
    path = tmp_path / name
    write_bag(path)
    p = run_child("""
        opts = bag.Reader.Options(limits_storage=getattr(bag.LimitsStorage, sys.argv[2]))
        r = bag.Reader(sys.argv[1], opts)
        n = len(r)
        report(lambda: r[n - 1])
        os.truncate(sys.argv[1], 4096)
        report(lambda: r[n - 1])
        report(lambda: list(r))
        report(lambda: r.read_indices([n - 1, 3, n - 2]))
        report(lambda: list(r.read_indices_iter(range(n - 50, n))))
        report(lambda: r.read())
    """, path, limits)
    before, *cut = reports(p)
    assert before["error"] is None
    for r in cut:
        assert_shrank(r, path)


def test_bag_reader_iterator_taken_before_the_cut(tmp_path):
    # A lazy iterator over a mapped .bag: the records of the chunk it was
    # working through come from the library's copy (made before the cut,
    # whole); the next chunk raises. None is half read. 300 records of
    # 32 KiB: several chunks.
    path = tmp_path / "r.bag"
    write_bag(path, n=300, size=32 << 10)
    want = list(bag.Reader(path))
    p = run_child("""
        r = bag.Reader(sys.argv[1])
        it = iter(r)
        got = [next(it) for _ in range(10)]
        os.truncate(sys.argv[1], 4096)
        def rest():
            for rec in it:
                got.append(rec)
        report(rest)
        print(json.dumps({"got": [g.hex() for g in got]}))
    """, path)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert p.returncode == 0, p.stderr[-2000:]
    got = [bytes.fromhex(h) for h in lines[1]["got"]]
    assert 10 <= len(got) < len(want) and got == want[:len(got)]
    assert_shrank(lines[0], path)


@pytest.mark.parametrize("compress", ["none", "zstd"])
def test_pack_reader_raises_naming_the_file(tmp_path, compress):
    path = tmp_path / "p.a2pack"
    with a2pack.PackWriter(path, align=256, compress=compress) as w:
        for s in range(20):
            w.add(make_run(s, 300))
    p = run_child("""
        r = a2pack.PackReader(sys.argv[1])
        n = len(r)
        report(lambda: r.decode(n - 2))
        os.truncate(sys.argv[1], 4096)
        report(lambda: r.decode(n - 2))
        report(lambda: r.read(n - 2))
        report(lambda: r.decode_batch([n - 2, n - 3]))
        report(lambda: r.decode_batch_columns([n - 2, n - 3, 0]))
        report(lambda: r.get_slice(n - 2))                # checks the CRC: reads the entry
        report(lambda: r.validate(full=True))
    """, path)
    before, *cut = reports(p)
    assert before["error"] is None
    for r in cut:
        assert str(path) in r["message"] and "shrank" in r["message"], r
        assert r["status"] == a2pack.errors.CorruptError.status


def test_foreign_sigbus_still_ends_the_process(ds_copy, tmp_path):
    # With a2pack's handler installed (a mapped dataset is open), a SIGBUS
    # the program raises, and a fault in a mapping a2pack did not make, end
    # the process by the signal as they would without a2pack - with or
    # without Python's faulthandler installed first.
    other = tmp_path / "other.bin"
    other.write_bytes(b"x" * 65536)
    raise_it = """
        ds = a2pack.Dataset(sys.argv[1], mmap=True)
        ds.get_batch(np.arange(10))
        import signal
        signal.raise_signal(signal.SIGBUS)
        print("survived")
    """
    fault_elsewhere = """
        import mmap
        ds = a2pack.Dataset(sys.argv[1], mmap=True)
        f = open(sys.argv[2], "rb")
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        os.truncate(sys.argv[2], 0)
        print(m[60000])
        print("survived")
    """
    for flags in ((), ("-X", "faulthandler")):
        for code in (raise_it, fault_elsewhere):
            p = run_child(code, ds_copy, other, python_flags=flags)
            assert p.returncode == -signal.SIGBUS, (flags, p.returncode, p.stdout, p.stderr[-2000:])
            assert "survived" not in p.stdout
            if flags:
                assert "Bus error" in p.stderr  # faulthandler still had its say
            other.write_bytes(b"x" * 65536)


def test_a_handler_installed_later_still_lets_guards_work(ds_copy, dataset_dir):
    # Python's faulthandler enabled after a2pack's handler: it sees the
    # fault first, hands it on by raising it again, and the library's read
    # still raises (faulthandler has printed its report by then).
    steps = ds_copy / "steps.npy"
    p = run_child("""
        import faulthandler
        ds = a2pack.Dataset(sys.argv[1], mmap=True)
        faulthandler.enable()
        n = len(ds)
        os.truncate(sys.argv[2], 4096)
        report(lambda: ds.get_batch(np.arange(n - 10, n)))
        # Another dataset opened now: a2pack's handler goes back on top,
        # chaining to faulthandler's.
        ds2 = a2pack.Dataset(sys.argv[3], mmap=True)
        report(lambda: ds.get_batch(np.arange(n - 10, n)))
    """, ds_copy, steps, dataset_dir)
    first, second = reports(p)
    assert_shrank(first, steps)
    assert_shrank(second, steps)
