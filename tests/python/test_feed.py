"""a2pack.Feed: the library-side training feed.

Order equal to the epoch sampler's whatever the threads, every batch equal to
the rows it names, zero-copy views (numpy, the buffer protocol, DLPack into
numpy and torch) that keep their slot alive, held batches past the ring,
checkpoints across epochs, fork, shutdown on exceptions and garbage
collection, and the pinning code without CUDA and through a recording
stand-in for libcudart (compiled here)."""

import _thread
import ctypes
import dis
import gc
import os
import pathlib
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import a2pack
from a2pack import errors

from shuffle_reference import index_shuffle
from test_dataset import make_run, write_runs

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("feedds")
    write_runs(tmp / "runs", [make_run(s, 40 + 11 * s) for s in range(14)])
    a2pack.build_dataset(tmp / "runs", tmp / "ds")
    return a2pack.Dataset(tmp / "ds")


def exponents_of(boards):
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    return ((boards[:, None] >> shifts) & np.uint64(0xF)).astype(np.uint8)


def check_batch(ds, b, moves_dtype=np.uint8):
    rows = ds.steps[b["indices"]]
    assert b.rows == len(rows)
    np.testing.assert_array_equal(b["exponents"], exponents_of(rows["board"]))
    assert b["moves"].dtype == moves_dtype
    np.testing.assert_array_equal(b["moves"], rows["move"])
    assert b["legal"].dtype == np.bool_ and b["legal"].shape == (len(rows), 4)
    np.testing.assert_array_equal(b["legal"], (rows["ev_legal"][:, None] >> np.arange(4)) & 1)
    np.testing.assert_array_equal(b["ev_values"], rows["ev_values"])


def task_count():
    return len(os.listdir("/proc/self/task"))


def expected_order(sel, batch_size, seed, epochs, shuffle):
    """The batches of `sel` a feed serves: the index shuffle's (the
    default), written out again from its description; or an EpochSampler's
    stored permutation."""
    want = []
    if shuffle == "stored":
        sampler = a2pack.EpochSampler(sel, batch_size=batch_size, seed=seed)
        for e in range(epochs):
            sampler.set_epoch(e)
            want += [b.copy() for b in sampler]
        return want
    for e in range(epochs):
        order = sel[index_shuffle(len(sel), seed, e)]
        want += [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    return want


def test_every_column_is_what_the_librarys_table_says(ds):
    """The bindings' column names come from the library's table, and each
    column of a batch has the table's dtype, rank and width; a value that is
    no column is refused."""
    from a2pack._native import ffi, lib
    info = ffi.new("a2pack_feed_column_info *")
    info.size = ffi.sizeof("a2pack_feed_column_info")
    names, defaults = [], []
    for c in range(lib.A2PACK_FEED_COLUMN_COUNT):
        assert lib.a2pack_feed_column_info_get(c, info) == lib.A2PACK_OK
        names.append(ffi.string(info.name).decode())
        if info.is_default:
            defaults.append(names[-1])
        assert bool(info.always) == (names[-1] == "indices")
        assert info.itemsize == np.dtype(a2pack.feed._DTYPES[info.dtype]).itemsize
    assert tuple(names) == a2pack.feed.COLUMNS and tuple(defaults) == a2pack.feed.DEFAULT_COLUMNS
    for bad in (lib.A2PACK_FEED_COLUMN_COUNT, 1000):
        assert lib.a2pack_feed_column_info_get(bad, info) == lib.A2PACK_E_INVALID_ARGUMENT
        assert "is not an a2pack_feed_column" in ffi.string(lib.a2pack_last_error()).decode()
    pr = a2pack.Priorities(len(ds))
    with a2pack.Feed(ds, batch_size=8, columns=names, window=2,
                     short="pad", priority=pr) as f:
        b = next(f)
        for c, name in enumerate(names):
            assert lib.a2pack_feed_column_info_get(c, info) == lib.A2PACK_OK
            a = b[name]
            assert a.dtype == a2pack.feed._DTYPES[info.dtype], name
            assert a.shape[2:] == ((info.width,) if info.ndim == 2 else ()), name


def test_options_not_given_take_the_librarys_defaults(ds):
    """Python sends only the options it is given: a feed opened with none
    has the shape a2pack_feed_options_init gives a C caller, and one given
    an option differs in that alone."""
    from a2pack._native import ffi, lib
    o = ffi.new("a2pack_feed_options *")
    lib.a2pack_feed_options_init(o)
    with a2pack.Feed(ds) as f:
        s = f.stats()
        b = next(f)
    assert (s["threads"], s["depth"], s["seed"]) == (o.threads, o.depth, o.seed)
    assert s["slots"] == (o.slots or o.depth + 2)
    assert b.global_rows == min(o.batch_size, len(ds))
    assert b["moves"].dtype == np.uint8 and o.moves_dtype == lib.A2PACK_FEED_DTYPE_U8
    assert sorted(b) == ["ev_values", "exponents", "indices", "legal", "moves"]
    with a2pack.Feed(ds, depth=2) as f:
        s2 = f.stats()
    assert (s2["depth"], s2["threads"], s2["seed"]) == (2, o.threads, o.seed)


@pytest.mark.parametrize("shuffle", ["index", "stored"])
@pytest.mark.parametrize("threads", range(1, 9))
def test_order_is_the_samplers(ds, threads, shuffle):
    sel = np.arange(0, len(ds), 2)
    want = expected_order(sel, 50, 4, 2, shuffle)
    kind = True if shuffle == "index" else "stored"
    with a2pack.Feed(ds, sel, batch_size=50, seed=4, threads=threads, depth=3, epochs=2,
                     shuffle=kind) as feed:
        got = []
        for b in feed:
            check_batch(ds, b)
            got.append(b["indices"].copy())
        del b  # the last batch's slot goes back
        st = feed.stats()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert st["batches_served"] == len(want) and st["epoch"] == 2 and st["held"] == 0


def test_sampler_argument_and_synchronous_depth(ds):
    sampler = a2pack.EpochSampler(n=len(ds), batch_size=64, seed=9, epoch=1)
    want = [b.copy() for b in sampler]
    feed = a2pack.Feed(ds, sampler=sampler, depth=0, epochs=2)
    got = [b["indices"].copy() for b in feed]
    assert [len(g) for g in got] == [len(w) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert feed.stats()["threads"] == 0


def test_all_columns_and_wide_moves(ds):
    feed = a2pack.Feed(ds, batch_size=100, columns=a2pack.feed.COLUMNS, moves_dtype=np.int64,
                       epochs=1, threads=2)
    n = 0
    for b in feed:
        check_batch(ds, b, np.int64)
        rows = ds.steps[b["indices"]]
        np.testing.assert_array_equal(b["boards"], rows["board"])
        np.testing.assert_array_equal(b["run_ids"], rows["run_id"])
        np.testing.assert_array_equal(b["step_indices"], rows["step_index"])
        np.testing.assert_array_equal(b["legal_mask"], rows["ev_legal"])
        assert b.exponents is b["exponents"]
        n += b.rows
    assert n == len(ds)
    with pytest.raises(ValueError, match="unknown column"):
        a2pack.Feed(ds, columns=("exponents", "nope"))
    with pytest.raises(ValueError, match="moves_dtype"):
        a2pack.Feed(ds, moves_dtype=np.float32)


def test_views_are_the_slot_zero_copy(ds):
    feed = a2pack.Feed(ds, batch_size=64, depth=1, slots=2)
    b = next(feed)
    col = b["ev_values"]
    addr = col.ctypes.data
    assert addr % 64 == 0
    assert np.frombuffer(memoryview(col), np.float32).ctypes.data == addr  # buffer protocol
    assert np.from_dlpack(col).ctypes.data == addr
    assert col.__dlpack_device__() == (1, 0)  # kDLCPU
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(b["moves"])
    assert t.data_ptr() == b["moves"].ctypes.data
    ev = torch.from_dlpack(col)
    assert ev.data_ptr() == addr
    keep = ev.clone()
    # Drop every Python view but the tensor: the slot stays held, the feed
    # goes on through the other slot, and the tensor's data never changes.
    del b, col, t
    gc.collect()
    assert feed.stats()["held"] == 1
    for _ in range(20):
        nb = next(feed)
        assert nb["ev_values"].ctypes.data != addr
        del nb
    assert torch.equal(ev, keep)
    del ev
    gc.collect()
    assert feed.stats()["held"] == 0


def _keep_views(kind, b):
    """Something of batch `b` a consumer might keep, and how to read its data."""
    if kind == "batch":
        return b, lambda k: k["boards"].copy()
    if kind == "column":
        return b["boards"], lambda k: k.copy()
    if kind == "slice":
        return b["boards"][1:5], lambda k: k.copy()
    if kind == "memoryview":
        return memoryview(b["boards"]), lambda k: np.frombuffer(k, np.uint64).copy()
    if kind == "dlpack":
        return np.from_dlpack(b["boards"]), lambda k: k.copy()
    if kind == "mapping":
        return dict(b), lambda k: k["boards"].copy()
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(b["boards"].view(np.int64))
    if kind == "torch":
        return t, lambda k: k.numpy().copy()
    return t[2:7], lambda k: k.numpy().copy()  # a view of a view: holds the storage only


def _run_past(ds, feed, kept, read, want):
    """Take 12 more batches (the ring comes round four times): each is right,
    `kept` still reads `want`, and its slot is the one held."""
    for _ in range(12):
        nb = next(feed)
        np.testing.assert_array_equal(np.asarray(nb["boards"]),
                                      ds.steps[np.asarray(nb["indices"])]["board"])
        del nb
        np.testing.assert_array_equal(read(kept), want)
    assert feed.stats()["held"] == 1


@pytest.mark.parametrize("kind", ["batch", "column", "slice", "memoryview", "dlpack", "mapping",
                                  "torch", "torch-view"])
def test_anything_kept_of_a_batch_keeps_its_slot(ds, kind):
    # The feed hands the same Python objects out again each time a slot
    # comes round; whatever the consumer keeps of a batch must hold it back.
    feed = a2pack.Feed(ds, batch_size=16, depth=1, slots=3, columns=("boards",))
    b = next(feed)
    kept, read = _keep_views(kind, b)
    want = read(kept)
    del b
    gc.collect()
    _run_past(ds, feed, kept, read, want)
    del kept
    gc.collect()
    assert feed.stats()["held"] == 0
    for _ in range(6):
        nb = next(feed)
        np.testing.assert_array_equal(nb["boards"], ds.steps[nb["indices"]]["board"])


@pytest.mark.parametrize("kind", ["batch", "tensor", "view", "numpy", "dlpack", "storage"])
def test_torch_tensors_kept_of_a_batch_keep_its_slot(ds, kind):
    torch = pytest.importorskip("torch")
    feed = a2pack.Feed(ds, batch_size=16, depth=1, slots=3, columns=("boards",), tensors="torch")
    b = next(feed)
    t = b["boards"]
    assert isinstance(t, torch.Tensor) and t.dtype == torch.uint64
    np.testing.assert_array_equal(t.numpy(), ds.steps[b["indices"].numpy()]["board"])
    # (The columns share one storage over the slot: keeping it keeps the slot.)
    kept = {"batch": b, "tensor": t, "view": t[3:9], "numpy": t.numpy(),
            "dlpack": np.from_dlpack(t), "storage": t.untyped_storage()}[kind]
    read = (lambda k: k["boards"].numpy().copy()) if kind == "batch" else (
        lambda k: np.asarray(k).copy())
    if kind == "storage":  # the storage's bytes, through a tensor made over it
        read = lambda k: torch.empty(0, dtype=torch.uint8).set_(k).numpy().copy()  # noqa: E731
    want = read(kept)
    del b, t
    gc.collect()
    _run_past(ds, feed, kept, read, want)
    del kept
    gc.collect()
    assert feed.stats()["held"] == 0
    with pytest.raises(ValueError, match="tensors must be"):
        a2pack.Feed(ds, tensors="jax")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to spare")
def test_producers_keep_off_only_the_consumers_cpu_and_only_when_told(ds):
    mine = os.sched_getaffinity(0)
    for spare in (True, False):
        feed = a2pack.Feed(ds, batch_size=8, depth=2, spare_cpu=spare)
        cpu = sorted(mine)[0]
        os.sched_setaffinity(0, {cpu})  # this thread only: the consumer stays put
        try:
            for _ in range(24):  # a 2 ms training step each
                check_batch(ds, next(feed))
                time.sleep(0.002)
        finally:
            os.sched_setaffinity(0, mine)
        # Whether the producers were moved off by now depends on how soon a
        # loaded machine ran them (the C++ suite's FeedPlacement drives the
        # decision step by step): here, that they keep off this CPU only,
        # and only when asked.
        spared = feed.stats()["spared_cpu"]
        assert spared in ((cpu, None) if spare else (None,))
        feed.close()


def test_a_dropped_batch_comes_round_as_the_same_objects(ds):
    feed = a2pack.Feed(ds, batch_size=16, depth=1, slots=3)
    seen = {}
    for _ in range(12):
        b = next(feed)
        check_batch(ds, b)
        seen.setdefault(id(b), 0)
        seen[id(b)] += 1
        del b
    # One set of objects per slot (the first batches found their slot free).
    assert len(seen) <= 3 and sum(seen.values()) == 12


def test_holding_every_slot_raises_instead_of_hanging(ds):
    # held_timeout: how long next() waits for a slot to be let go first
    # (test_jax_feed.py has the wait itself); 0 raises at once.
    feed = a2pack.Feed(ds, batch_size=32, depth=2, slots=3, columns=("boards",), held_timeout=0)
    held = [next(feed) for _ in range(3)]
    copies = [h["boards"].copy() for h in held]
    with pytest.raises(errors.FullError, match="holds all 3 ring slots"):
        next(feed)
    st = feed.stats()
    assert st["held"] == 3 and st["ready"] == 0
    del held[0]
    gc.collect()
    for _ in range(10):
        check = next(feed)
        np.testing.assert_array_equal(check["boards"], ds.steps[check["indices"]]["board"])
        del check
    for h, c in zip(held, copies[1:]):
        np.testing.assert_array_equal(h["boards"], c)
    feed.close()
    for h, c in zip(held, copies[1:]):  # valid after close too
        np.testing.assert_array_equal(h["boards"], c)
    with pytest.raises(errors.ClosedError):
        next(feed)


def test_state_dict_resumes_across_epochs(ds):
    sel = np.arange(0, len(ds), 3)
    kw = dict(batch_size=40, seed=12, epochs=3)
    full = [b["indices"].copy() for b in a2pack.Feed(ds, sel, **kw)]
    per_epoch = -(-len(sel) // 40)
    for k in (0, 2, per_epoch, per_epoch + 1):
        feed = a2pack.Feed(ds, sel, threads=2, **kw)
        for i in range(k):
            np.testing.assert_array_equal(next(feed)["indices"], full[i])
        sd = feed.state_dict()
        assert isinstance(sd["state"], bytes)
        assert (sd["epoch"], sd["batch"]) == divmod(k, per_epoch)
        assert sd["seed"] == 12 and sd["batches_per_epoch"] == per_epoch
        feed.close()
        other = a2pack.Feed(ds, sel, threads=3, depth=1, **{**kw, "seed": 0})
        other.load_state_dict(sd)
        rest = [b["indices"].copy() for b in other]
        assert len(rest) == len(full) - k
        for g, w in zip(rest, full[k:]):
            np.testing.assert_array_equal(g, w)
    bad = bytearray(sd["state"])
    bad[-9] ^= 1
    with pytest.raises(errors.CorruptError, match="damaged"):
        a2pack.Feed(ds, sel, **kw).load_state_dict(bytes(bad))
    with pytest.raises(errors.InvalidArgumentError, match="another set of rows"):
        a2pack.Feed(ds, sel[:-1], **kw).load_state_dict(sd)


# A feed state written by the library before the index shuffle existed: a
# feed over every row of `ds` (1 561 rows), batch size 64, seed 5, shuffled
# (by the stored permutation, then the only one), taken after 3 batches of
# epoch 1.
OLD_STATE = bytes.fromhex(
    "4132465301000000010000007f0bfa511906000000000000400000004132535301000000"
    "050000000000000001000000000000000300000000000000400000000000000019060000"
    "000000002d190c2a84302895000000003dfcebb713fedaf3")


def old_state(ds):
    """OLD_STATE and the 30 batches that followed it: today's stored
    permutation writes the same bytes at the same place."""
    feed = a2pack.Feed(ds, batch_size=64, seed=5, shuffle="stored")
    for _ in range(-(-len(ds) // 64) + 3):
        next(feed)
    assert feed.state_dict()["state"] == OLD_STATE
    return OLD_STATE, [next(feed)["indices"].copy() for _ in range(30)]


def test_a_state_keeps_its_permutation_whatever_the_feed_it_is_loaded_into(ds):
    state, want = old_state(ds)
    # The sampler part's flags (after the feed's 28-byte header): bit 1, the
    # index shuffle, is clear, as in every state from before it existed.
    assert state[28 + 56] & 2 == 0
    resumed = a2pack.Feed(ds, batch_size=64, seed=0)  # the default: the index shuffle
    resumed.load_state_dict(state)
    got = [next(resumed)["indices"].copy() for _ in range(30)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # And an index-shuffle state into a feed opened for the stored one.
    index = a2pack.Feed(ds, batch_size=64, seed=9)
    for _ in range(7):
        next(index)
    st = index.state_dict()["state"]
    assert st[28 + 56] & 2 == 2
    want = [next(index)["indices"].copy() for _ in range(30)]
    other = a2pack.Feed(ds, batch_size=64, shuffle="stored")
    other.load_state_dict(st)
    for w in want:
        np.testing.assert_array_equal(next(other)["indices"], w)
    # Shuffled against unshuffled is still refused, naming both.
    with pytest.raises(errors.InvalidArgumentError, match="shuffle on; this feed has shuffle off"):
        a2pack.Feed(ds, batch_size=64, shuffle=False).load_state_dict(st)
    with pytest.raises(ValueError, match="shuffle must be True, False, 'index' or 'stored'"):
        a2pack.Feed(ds, shuffle="random")


def test_the_index_shuffle_serves_every_row_once_an_epoch_and_reshuffles(ds):
    epochs = [[], []]
    for b in a2pack.Feed(ds, batch_size=100, seed=3, epochs=2):
        epochs[b.epoch].append(b["indices"].copy())
    for e in epochs:
        np.testing.assert_array_equal(np.sort(np.concatenate(e)), np.arange(len(ds)))
    assert not np.array_equal(np.concatenate(epochs[0]), np.concatenate(epochs[1]))
    np.testing.assert_array_equal(np.concatenate(epochs[0]), index_shuffle(len(ds), 3, 0))


def test_ranks_split_each_global_batch(ds):
    kw = dict(batch_size=70, seed=2, epochs=1)
    whole = [b["indices"].copy() for b in a2pack.Feed(ds, **kw)]
    parts = [[b["indices"].copy() for b in a2pack.Feed(ds, rank=r, world=3, **kw)]
             for r in range(3)]
    for i, w in enumerate(whole):
        np.testing.assert_array_equal(np.concatenate([p[i] for p in parts]), w)


@pytest.mark.parametrize("new_world", [1, 2, 3])
def test_a_feed_saved_at_4_ranks_resumes_at_another_count(ds, new_world):
    # Every rank's state is the same (the world size is not in it): resumed
    # at another number of ranks the epoch goes on from the next global batch,
    # no row seen twice and none dropped.
    kw = dict(batch_size=60, seed=6, epochs=1)
    feeds = [a2pack.Feed(ds, rank=r, world=4, **kw) for r in range(4)]
    seen = []
    for _ in range(3):
        for f in feeds:
            seen.append(next(f)["indices"].copy())
    states = [f.state_dict()["state"] for f in feeds]
    assert all(s == states[0] for s in states)
    for r in range(new_world):
        f = a2pack.Feed(ds, rank=r, world=new_world, **kw)
        f.load_state_dict(states[0])
        seen.extend(b["indices"].copy() for b in f)
    rows = np.sort(np.concatenate(seen))
    np.testing.assert_array_equal(rows, np.arange(len(ds)))


def test_exceptions_and_garbage_collection_stop_the_threads(ds):
    before = task_count()
    feed = a2pack.Feed(ds, batch_size=16, threads=4, depth=4)
    assert task_count() >= before + 4  # (+1 while the next epoch's order is made)
    kept = None
    with pytest.raises(KeyboardInterrupt):
        with feed:
            for i, b in enumerate(feed):
                kept = b
                if i == 3:
                    raise KeyboardInterrupt
    assert task_count() == before
    check_batch(ds, kept)  # a batch kept past the exception is intact
    feed2 = a2pack.Feed(ds, batch_size=16, threads=3)
    next(feed2)
    assert task_count() >= before + 3
    del feed2
    gc.collect()
    assert task_count() == before


def test_fork_after_open(ds):
    feed = a2pack.Feed(ds, batch_size=32, threads=2)
    b = next(feed)
    idx = b["indices"].copy()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            next(feed)
            code = 1
        except errors.ClosedError as e:
            code = 0 if "forked" in str(e) else 2
        except BaseException:
            code = 3
        if not np.array_equal(b["indices"], idx):
            code = 4
        del b
        feed.close()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    for _ in range(5):
        check_batch(ds, next(feed))


# ---------------------------------------------------------------- pinning
@pytest.fixture(scope="module")
def fake_cudart(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the libcudart stand-in")
    out = tmp_path_factory.mktemp("cudart") / "libfakecudart.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out),
                    str(REPO / "tests" / "capi" / "fake_cudart.c")], check=True)
    return out


def test_without_cuda_the_ring_is_plain_memory(ds, monkeypatch):
    monkeypatch.setenv("A2PACK_CUDART", "/nonexistent/libcudart.so.12")
    feed = a2pack.Feed(ds, batch_size=32)  # auto: falls back
    assert feed.stats()["pinned"] is False
    b = next(feed)
    assert b.pinned is False
    check_batch(ds, b)
    with pytest.raises(errors.UnsupportedError, match="/nonexistent/libcudart.so.12"):
        a2pack.Feed(ds, batch_size=32, pin="on")
    with pytest.raises(ValueError, match="pin must be"):
        a2pack.Feed(ds, pin="maybe")


def test_pinning_through_a_cuda_runtime(ds, fake_cudart, monkeypatch):
    import ctypes
    monkeypatch.setenv("A2PACK_CUDART", str(fake_cudart))
    stub = ctypes.CDLL(str(fake_cudart))
    regs = ctypes.c_int.in_dll(stub, "fake_cudart_registers")
    unregs = ctypes.c_int.in_dll(stub, "fake_cudart_unregisters")
    size = ctypes.c_size_t.in_dll(stub, "fake_cudart_last_size")
    r0, u0 = regs.value, unregs.value
    feed = a2pack.Feed(ds, batch_size=32, pin="on", threads=2)
    st = feed.stats()
    assert st["pinned"] is True and regs.value == r0 + 1
    assert size.value == st["slot_bytes"] * st["slots"]
    b = next(feed)
    assert b.pinned is True
    check_batch(ds, b)
    # Every column (and what torch or numpy make of it) is the registered ring's memory.
    ring = ctypes.c_void_p.in_dll(stub, "fake_cudart_last_ptr").value
    for name in b:
        addr = np.from_dlpack(b[name]).ctypes.data
        assert addr == b[name].ctypes.data and ring <= addr < ring + size.value
    feed.close()
    assert unregs.value == u0  # the held batch keeps the ring
    del b
    gc.collect()
    assert unregs.value == u0 + 1
    monkeypatch.setenv("FAKE_CUDART_FAIL", "1")
    assert a2pack.Feed(ds, batch_size=32).stats()["pinned"] is False
    with pytest.raises(errors.UnsupportedError, match="no CUDA-capable device"):
        a2pack.Feed(ds, batch_size=32, pin="on")


def test_a_rank_may_get_no_rows(ds):
    # Global batches of 2 over 3 ranks: rank 0's part is empty.
    b = next(a2pack.Feed(ds, batch_size=2, rank=0, world=3, columns=a2pack.feed.COLUMNS))
    assert b.rows == 0 and b.global_rows == 2
    assert b["exponents"].shape == (0, 16) and b["legal"].shape == (0, 4)
    assert b["moves"].shape == (0,) and b["indices"].dtype == np.int64
    b = next(a2pack.Feed(ds, batch_size=2, rank=2, world=3))
    assert b.rows == 1
    check_batch(ds, b)


_UNDER_A_MEMORY_LIMIT = """
import os, resource, sys
import a2pack
from a2pack import errors
from a2pack.logger import DataLogger

def limit(headroom):
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (mapped + headroom, resource.RLIM_INFINITY))

ds = a2pack.Dataset(sys.argv[1])
threads = len(os.listdir("/proc/self/task"))
# First (the stacks of threads that ended are kept for reuse): room for the
# logger's ring, not for its writer thread's stack of 8 MiB.
limit(4 << 20)
try:
    DataLogger(sys.argv[2], ring_bytes=1 << 20, frame_bytes=1 << 16, writer_threads=1)
except errors.NoMemoryError as e:
    print("logger:", e)
limit(64 << 20)  # room for a few thread stacks, not for 500
try:
    a2pack.Feed(ds, batch_size=16, threads=500)
except errors.NoMemoryError as e:
    print("feed:", e)
assert len(os.listdir("/proc/self/task")) == threads  # the ones started were stopped
f = a2pack.Feed(ds, batch_size=16, threads=2)
for _ in range(10):
    next(f)
f.close()
"""


def test_threads_that_cannot_start_are_a_resource_error_naming_the_count(ds, tmp_path):
    # Under an address-space limit std::thread fails: NoMemoryError (a
    # MemoryError), not InternalError; the feed's names the thread and the
    # count asked for.
    r = subprocess.run([sys.executable, "-c", _UNDER_A_MEMORY_LIMIT, ds.path, tmp_path / "log"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout + r.stderr
    assert lines[0].startswith("logger: out of threads or memory: ")
    assert lines[1].startswith("feed: feed: cannot start producer thread ")
    assert " of 500: " in lines[1] and "fewer threads" in lines[1]


# ---------------------------------------------------------------- mixing
def _mix_sources(ds):
    n = len(ds)
    return [np.arange(0, n // 3, dtype=np.int64), np.arange(n // 3, n, dtype=np.int64)]


@pytest.mark.parametrize("threads", [1, 3])
def test_feed_over_a_mix_is_the_mixs_order(ds, threads):
    from a2pack.mix import MixSampler
    old, new = _mix_sources(ds)
    mix = MixSampler([old, new], [1.0, 3.0], batch_size=40, seed=3)
    feed = a2pack.Feed(ds, mix=mix, threads=threads, depth=3,
                       columns=("boards", "exponents", "moves", "legal", "ev_values"))
    st = feed.stats()
    assert st["batches_per_epoch"] == 0 and st["seed"] == 3
    # Far past either source's size: the mix (and so the feed) never ends.
    for k in range(60):
        b = next(feed)
        assert (b.epoch, b.batch, b.rows) == (0, k, 40)
        np.testing.assert_array_equal(b["indices"], mix.batch(k))
        assert np.isin(b["indices"], old).sum() == 10  # exactly 1/4 of every batch
        check_batch(ds, b)
        np.testing.assert_array_equal(b["boards"], ds.steps[b["indices"]]["board"])


def test_feed_over_a_mix_ranks_make_the_global_batch(ds):
    from a2pack.mix import MixSampler
    mix = MixSampler(_mix_sources(ds), [2.0, 1.0], batch_size=31, seed=5)
    feeds = [a2pack.Feed(ds, mix=mix, rank=r, world=3, columns=("boards",)) for r in range(3)]
    for k in range(20):
        parts = [next(f)["indices"].copy() for f in feeds]
        np.testing.assert_array_equal(np.concatenate(parts), mix.batch(k))


def test_feed_over_a_mix_resumes_and_changes_weights(ds):
    from a2pack.mix import MixSampler
    old, new = _mix_sources(ds)
    mix = MixSampler([old, new], [1.0, 1.0], batch_size=24, seed=8)
    feed = a2pack.Feed(ds, mix=mix, threads=2, columns=("boards",))
    for _ in range(7):
        next(feed)
    state = feed.state_dict()
    assert state["batch"] == 7
    want = [next(feed)["indices"].copy() for _ in range(5)]
    # Another process would open the same mix (any weights, any seed) and load.
    other = MixSampler([old, new], [0.5, 9.0], batch_size=24, seed=99)
    resumed = a2pack.Feed(ds, mix=other, columns=("boards",))
    next(resumed)
    resumed.load_state_dict(state)
    assert resumed.stats()["seed"] == 8
    got = [next(resumed)["indices"].copy() for _ in range(5)]
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g)
    # New weights from the next batch on; the batches filled ahead are made again.
    resumed.set_weights([0.0, 1.0])
    for _ in range(6):
        b = next(resumed)
        assert not np.isin(b["indices"], old).any()
    with pytest.raises(errors.InvalidArgumentError):
        resumed.set_weights([1.0])  # one weight per source
    assert not np.isin(next(resumed)["indices"], old).any()  # unchanged by the refusal
    # An epoch sampler's feed state is not a mix's, and the other way round.
    plain = a2pack.Feed(ds, batch_size=24)
    with pytest.raises(errors.InvalidArgumentError, match="mixing sampler"):
        plain.load_state_dict(state)
    with pytest.raises(errors.InvalidArgumentError, match="epoch sampler"):
        resumed.load_state_dict(plain.state_dict())
    with pytest.raises(errors.InvalidArgumentError, match="mixing sampler"):
        plain.set_weights([1.0])


def test_feed_over_a_mix_refuses_rows_outside_the_dataset(ds):
    from a2pack.mix import MixSampler
    mix = MixSampler([np.array([0, 1, len(ds)])], [1.0], batch_size=2)
    with pytest.raises(errors.OutOfRangeError, match=f"row {len(ds)}"):
        a2pack.Feed(ds, mix=mix)
    with pytest.raises(ValueError, match="mix alone"):
        a2pack.Feed(ds, np.arange(4), mix=MixSampler([4], [1.0], batch_size=2))


def _crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def _with_weights(state, at, weights):
    """`state` with the weights of the mix state at offset `at` replaced (the
    CRCs are then made again with _seal)."""
    b = bytearray(state)
    for i, w in enumerate(weights):
        struct.pack_into("<d", b, at + 40 + 32 * i + 16, w)
    return b


def _seal(b, start, end):
    """Make the CRC32C in the last 4 bytes of b[start:end] right again: valid
    bytes, as a state written by hand would be."""
    struct.pack_into("<I", b, end - 4, _crc32c(bytes(b[start:end - 4])))


def test_mix_weights_whose_sum_overflows_mix_by_their_ratio():
    # Two weights of 1e308 are finite; their sum is not. They mix as 1 and 1
    # at every entry point, and weights refused leave the mix as it was.
    from a2pack.mix import MixSampler
    even = MixSampler([10, 10], [1.0, 1.0], batch_size=4, seed=2)
    m = MixSampler([10, 10], [1e308, 1e308], batch_size=4, seed=2)
    assert m.weights == [1e308, 1e308]
    for b in range(12):
        assert m.counts(b).tolist() == [2, 2]
        np.testing.assert_array_equal(m.batch(b), even.batch(b))
    m = MixSampler([10, 10], [1.0, 3.0], batch_size=4, seed=2)
    m.set_weights([1e308, 1e308], from_batch=3)
    assert m.counts(3).tolist() == [2, 2]
    want = m.batch(5)
    for bad in ([1e308, float("nan")], [1e308, -1e308], [float("inf"), 1.0], [0.0, 0.0]):
        with pytest.raises(errors.InvalidArgumentError, match="weight|sum to 0"):
            m.set_weights(bad, from_batch=5)
        assert m.weights == [1e308, 1e308]
        np.testing.assert_array_equal(m.batch(5), want)
        m.batch(3)  # still fetchable: where the weights last changed did not move
    # A valid state carrying such weights loads.
    b = _with_weights(m.state(5), 0, [1e308, 1e308 / 3])
    _seal(b, 0, len(b))
    other = MixSampler([10, 10], [1.0, 1.0], batch_size=4, seed=9)
    other.load_state_dict(bytes(b))
    assert other.weights == [1e308, 1e308 / 3] and other.seed == 2
    assert other.next_batch == 5 and other.counts(5).tolist() == [3, 1]
    # 1e-308 beside 1e308 is positive and gets no rows; subnormals mix too.
    assert MixSampler([10, 10], [1e308, 1e-308], batch_size=4).counts(0).tolist() == [4, 0]
    assert MixSampler([10, 10], [5e-324, 1.5e-323], batch_size=4).counts(0).tolist() == [1, 3]


def test_feed_over_a_mix_takes_weights_whose_sum_overflows(ds):
    from a2pack.mix import MixSampler
    old, new = _mix_sources(ds)
    mix = MixSampler([old, new], [1.0, 3.0], batch_size=24, seed=8)
    ref = MixSampler([old, new], [1.0, 3.0], batch_size=24, seed=8)
    feed = a2pack.Feed(ds, mix=mix, columns=("boards",))
    for _ in range(3):
        next(feed)
    feed.set_weights([1e308, 1e308])
    ref.set_weights([1.0, 1.0], from_batch=3)
    for k in range(3, 8):
        np.testing.assert_array_equal(next(feed)["indices"], ref.batch(k))
    with pytest.raises(errors.InvalidArgumentError, match="weight of source 0"):
        feed.set_weights([float("nan"), 1.0])
    np.testing.assert_array_equal(next(feed)["indices"], ref.batch(8))
    # A feed state (a frame around the mix's state) with such weights, both
    # CRCs valid, loads into another feed.
    st = feed.state_dict()["state"]
    b = _with_weights(st, 28, [1e308 / 4, 1e308])
    _seal(b, 28, len(b) - 4)
    _seal(b, 0, len(b))
    other = a2pack.Feed(ds, mix=MixSampler([old, new], [1.0, 1.0], batch_size=24),
                        columns=("boards",))
    other.load_state_dict(bytes(b))
    ref.set_weights([1.0, 4.0], from_batch=9)
    for k in range(9, 14):
        np.testing.assert_array_equal(next(other)["indices"], ref.batch(k))


class _Copy:
    """Stands in for a CUDA event recorded after an asynchronous copy out of
    a batch: query() says whether it finished, synchronize() waits for it."""

    def __init__(self):
        self.done = False
        self.waited = 0

    def query(self):
        return self.done

    def synchronize(self):
        self.waited += 1
        self.done = True


def test_a_copy_still_running_keeps_the_slot_of_a_dropped_batch(ds):
    feed = a2pack.Feed(ds, batch_size=16, depth=1, slots=4, columns=("boards",))
    b = next(feed)
    want = b["boards"].copy()
    where = b["boards"].ctypes.data
    copy = _Copy()
    b.hold_until(copy)
    del b
    gc.collect()
    for _ in range(10):  # the ring comes round: that slot is skipped
        nb = next(feed)
        assert nb["boards"].ctypes.data != where
        np.testing.assert_array_equal(nb["boards"], ds.steps[nb["indices"]]["board"])
        del nb
    assert feed.stats()["held"] == 1  # only the copying batch's slot
    # The slot's bytes are still the batch's (read through a fresh view).
    np.testing.assert_array_equal(
        np.frombuffer((ctypes.c_uint64 * 16).from_address(where), np.uint64), want)
    copy.done = True
    assert feed.stats()["held"] == 0
    assert copy.waited == 0


def test_copies_are_waited_for_when_every_slot_is_held_by_them_and_at_close(ds):
    feed = a2pack.Feed(ds, batch_size=16, depth=1, slots=3, columns=("boards",))
    copies = []
    for _ in range(8):  # each batch dropped with its copy still "running"
        b = next(feed)
        np.testing.assert_array_equal(b["boards"], ds.steps[b["indices"]]["board"])
        copies.append(_Copy())
        b.hold_until(copies[-1])
        del b
    # No FullError: when every slot was held by copies only, next() waited
    # for the oldest one instead.
    assert sum(c.waited for c in copies) >= 5
    b = next(feed)
    last = _Copy()
    b.hold_until(last)
    feed.close()  # waits for the copies of batches it still tracks
    assert last.waited == 1
    with pytest.raises(TypeError, match="query\\(\\) or is_ready\\(\\)"):
        b.hold_until(object())


def test_to_copies_every_column(ds):
    torch = pytest.importorskip("torch")
    for tensors in (None, "torch"):
        feed = a2pack.Feed(ds, batch_size=16, depth=1, columns=("boards", "moves"),
                           tensors=tensors)
        b = next(feed)
        out = b.to("cpu")
        assert set(out) == {"boards", "moves", "indices"}
        for name, t in out.items():
            assert isinstance(t, torch.Tensor)
            np.testing.assert_array_equal(t.numpy(), np.asarray(b[name]))
        assert not b._pending  # no asynchronous copy to guard on the CPU
        feed.close()


def test_batches_and_feeds_refuse_pickling_and_say_what_to_do(ds):
    import copy
    import pickle

    feed = a2pack.Feed(ds, batch_size=16, depth=1, columns=("boards", "moves"))
    b = next(feed)
    for fn in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match=r"cannot be pickled or copied.*batch\.copy\(\)"):
            fn(b)
        with pytest.raises(TypeError, match=r"cannot be pickled or copied.*state_dict\(\)"):
            fn(feed)
    # A batch not yet made (as unpickling would leave it) has no columns, and
    # says so instead of looking them up for ever.
    blank = a2pack.FeedBatch.__new__(a2pack.FeedBatch)
    with pytest.raises(AttributeError):
        blank.boards
    # What to do instead: copies, which outlive the slot and pickle.
    cols = b.copy()
    assert set(cols) == {"boards", "moves", "indices"}
    for name, col in cols.items():
        np.testing.assert_array_equal(col, b[name])
        assert not np.shares_memory(col, b[name])
    want = {k: v.copy() for k, v in cols.items()}
    del b
    for _ in range(8):  # the slot comes round again
        next(feed)
    back = pickle.loads(pickle.dumps(cols))
    for name in want:
        np.testing.assert_array_equal(back[name], want[name])
    np.testing.assert_array_equal(cols["boards"], ds.steps[cols["indices"]]["board"])
    feed.close()


def test_the_c_part_serves_next_where_built(ds):
    # feed.py finds the C part (a2pack/_feedcore) beside the library or in
    # the installed package; where one is built, Feed's __next__ is its own.
    from a2pack import feed as F

    built = (pathlib.Path(F.library_path).parent / "_feedcore.abi3.so").is_file() or any(
        pathlib.Path(F.__file__).parent.glob("_feedcore*.so"))
    if os.environ.get("A2PACK_FEEDCORE") == "0" or not built:
        assert F._core is None
        assert "__next__" in vars(F._PyFeedBase)
        return
    assert F._core is not None
    feed = a2pack.Feed(ds, batch_size=16, depth=2)
    assert isinstance(feed, F._core.FeedBase)
    assert "__next__" not in vars(a2pack.Feed)  # a Python one would replace the C slot
    for _ in range(30):
        check_batch(ds, next(feed))
    feed.close()
    with pytest.raises(errors.ClosedError):
        next(feed)


def test_a_batch_taken_but_not_delivered_is_handed_out_again(ds):
    # A batch the library handed out that never reached the consumer (an
    # interrupt as it came back) goes back to the feed at the next call:
    # stats and the state count it as not taken, and next() returns it.
    from a2pack._native import ffi, lib

    feed = a2pack.Feed(ds, batch_size=16, depth=2, slots=4, shuffle=False, columns=("boards",))
    first = next(feed)
    assert lib.a2pack_feed_advance(feed._h, ffi.NULL, 0, 1000, feed._out, feed._info,
                                   feed._ended) == 0
    assert feed._out[0] != ffi.NULL
    st = feed.stats()
    assert feed._out[0] == ffi.NULL
    assert (st["held"], st["next_batch"], st["batches_served"]) == (1, 1, 1)
    assert feed.state_dict()["batch"] == 1
    b = next(feed)
    assert b.batch == first.batch + 1
    del first, b
    gc.collect()
    for _ in range(10):
        nb = next(feed)
        np.testing.assert_array_equal(nb["boards"], ds.steps[nb["indices"]]["board"])
    del nb
    assert feed.stats()["held"] == 0


def test_close_gives_back_a_batch_taken_but_not_delivered(ds):
    # The same interrupted next(), then close() with no next() after it: the
    # slot goes back (else it, and the ring with it, would stay allocated).
    from a2pack._native import ffi, lib

    feed = a2pack.Feed(ds, batch_size=16, depth=2, slots=4, shuffle=False, columns=("boards",))
    kept = next(feed)
    assert lib.a2pack_feed_advance(feed._h, ffi.NULL, 0, 1000, feed._out, feed._info,
                                   feed._ended) == 0
    out = feed._out
    assert out[0] != ffi.NULL
    feed.close()
    assert out[0] == ffi.NULL
    np.testing.assert_array_equal(kept["boards"], ds.steps[kept["indices"]]["board"])


def test_a_collected_feed_gives_back_a_batch_taken_but_not_delivered(ds, monkeypatch):
    # Neither next() nor close() after the interrupted one: collecting the
    # feed gives the slot back.
    from a2pack import feed as F
    from a2pack._native import ffi, lib

    released = []
    original = F._release_left_over

    def spy(out):
        released.append(out[0] != ffi.NULL)
        original(out)

    monkeypatch.setattr(F, "_release_left_over", spy)
    feed = a2pack.Feed(ds, batch_size=16, depth=2, slots=4, shuffle=False, columns=("boards",))
    assert lib.a2pack_feed_advance(feed._h, ffi.NULL, 0, 1000, feed._out, feed._info,
                                   feed._ended) == 0
    del feed
    gc.collect()
    assert released == [True]


# ---------------------------------------------------------------- threads, interrupts
def test_two_threads_draining_one_feed_get_every_batch_once_and_intact(ds):
    kw = dict(batch_size=16, depth=3, slots=12, threads=2, seed=4, epochs=2,
              columns=("boards", "moves", "exponents", "legal", "ev_values"))
    want = [b["indices"].copy() for b in a2pack.Feed(ds, **kw)]
    feed = a2pack.Feed(ds, **kw)
    got = [[], []]
    failures = []

    def drain(k):
        kept = []  # a few batches held a while: their slots must not be refilled
        try:
            for b in feed:
                idx = b["indices"].copy()
                rows = ds.get_batch(idx)
                np.testing.assert_array_equal(b["boards"], rows["board"])
                np.testing.assert_array_equal(b["moves"], rows["move"])
                kept.append((b, idx, rows))
                if len(kept) > 1 + k:
                    old, old_idx, old_rows = kept.pop(0)
                    # Still its own rows, however far the feed has moved on.
                    np.testing.assert_array_equal(old["indices"], old_idx)
                    np.testing.assert_array_equal(old["boards"], old_rows["board"])
                    check_batch(ds, old)
                got[k].append((b.sequence, idx))
                if k and b.sequence % 5 == 0:
                    feed.stats()  # the consumer side from both threads, not only next()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the threads take turns often
    try:
        ts = [threading.Thread(target=drain, args=(k,)) for k in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
    finally:
        sys.setswitchinterval(switch)
    assert not any(t.is_alive() for t in ts), "a thread hangs in next()"
    assert not failures, failures
    both = sorted(got[0] + got[1], key=lambda x: x[0])
    assert [seq for seq, _ in both] == list(range(len(want)))  # each batch once, none lost
    for (seq, idx) in both:
        np.testing.assert_array_equal(idx, want[seq])
    assert got[0] and got[1]
    feed.close()


def _points_of(code, cache={}):  # noqa: B006 - a cache on purpose
    """Offsets in `code` where CPython may raise a pending KeyboardInterrupt
    (or let another thread run): as a call returns (the instruction after
    it) and at each loop's back edge. (And as a function begins: the trace's
    call event.)"""
    pts = cache.get(code)
    if pts is None:
        ins = list(dis.get_instructions(code))
        pts = set()
        for i, x in enumerate(ins):
            if x.opname.startswith("JUMP_BACKWARD"):
                pts.add(x.offset)
            elif x.opname.startswith("CALL") and i + 1 < len(ins):
                pts.add(ins[i + 1].offset)
        cache[code] = pts
    return pts


class _InterruptAt:
    """A trace function raising KeyboardInterrupt at the n-th of those points
    (or a function's entry) in the package's feed code; `seen` counts the
    points passed."""

    FILES = None

    def __init__(self, n):
        from a2pack import _native, feed as F
        if _InterruptAt.FILES is None:
            _InterruptAt.FILES = {F.__file__, _native.__file__}
        self.n = n
        self.seen = 0
        self.fired = False

    def __call__(self, frame, event, arg):
        code = frame.f_code
        # Finalizers (a _Slot's __del__) run wherever collection happens;
        # an exception there is not raised to the caller.
        if event != "call" or code.co_filename not in self.FILES or code.co_name in (
                "__del__", "release"):
            return None
        frame.f_trace_opcodes = True
        self._point()
        return self._local

    def _local(self, frame, event, arg):
        if event == "opcode" and frame.f_lasti in _points_of(frame.f_code):
            self._point()
        return self._local

    def _point(self):
        if self.fired:
            return
        if self.seen == self.n:
            self.fired = True
            raise KeyboardInterrupt
        self.seen += 1


@pytest.mark.parametrize("depth", [0, 2])
def test_an_interrupt_anywhere_in_next_loses_no_batch(ds, depth):
    # At every point of next() where an interrupt can come (for the first
    # batches, the slots' first time round; then every few points): the
    # state resumes with exactly the batches not delivered, and the next
    # next() returns the one interrupted.
    kw = dict(batch_size=64, depth=depth, slots=5, threads=1, seed=3, epochs=2,
              columns=("boards",))
    want = [(b.epoch, b.batch, b["indices"].copy()) for b in a2pack.Feed(ds, **kw)]
    feed = a2pack.Feed(ds, **kw)
    kept = []
    interrupts = 0
    for k, (epoch, batch, idx) in enumerate(want):
        step = 1 if k < 8 or k == len(want) // 2 else 5
        n = k % step
        while True:
            tracer = _InterruptAt(n)
            sys.settrace(tracer)
            try:
                b = next(feed)
            except KeyboardInterrupt:
                sys.settrace(None)
                assert tracer.fired
                interrupts += 1
                st = feed.state_dict()
                assert (st["epoch"], st["batch"]) == (epoch, batch), (k, n)
                if n % 4 == 0:
                    other = a2pack.Feed(ds, **kw)
                    other.load_state_dict(st)
                    np.testing.assert_array_equal(next(other)["indices"], idx)
                    other.close()
                n += step
                continue
            finally:
                sys.settrace(None)
            break
        assert (b.epoch, b.batch) == (epoch, batch), (k, n)
        np.testing.assert_array_equal(b["indices"], idx)
        np.testing.assert_array_equal(b["boards"], ds.steps[idx]["board"])
        kept.append(b)  # two held at a time: dropped ones go back at later calls
        if len(kept) > 2:
            kept.pop(0)
        del b
    assert interrupts > len(want)
    with pytest.raises(StopIteration):
        next(feed)
    del kept
    gc.collect()
    assert feed.stats()["held"] == 0  # no slot lost on the way
    feed.close()


def test_ctrl_c_at_any_moment_loses_no_batch(ds):
    # Ctrl-C as it really comes (the main thread told from another one, at
    # whatever moment), many times over 3 epochs: every batch is delivered
    # once, in order, and after each interrupt the state resumes with the
    # next one.
    kw = dict(batch_size=8, depth=2, threads=1, seed=1, epochs=3, columns=("boards",))
    want = [b.sequence for b in a2pack.Feed(ds, **kw)]
    first = a2pack.Feed(ds, **kw)
    positions = [(b.epoch, b.batch) for b in first]
    feed = a2pack.Feed(ds, **kw)
    gate = threading.Lock()
    armed = [False]
    done = threading.Event()

    def interrupter():
        rng = random.Random(7)
        while not done.is_set():
            time.sleep(rng.random() * 3e-4)
            with gate:
                if armed[0]:
                    armed[0] = False  # once per arming: never while the handler runs
                    _thread.interrupt_main()

    def wait_for_the_interrupter():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(1e-3)  # the armed interrupter raises KeyboardInterrupt in here
        raise AssertionError("the interrupter thread did not run for 120 s")

    # Python's own Ctrl-C handler, whatever this process inherited: a shell
    # starts a background job with SIGINT ignored, and interrupt_main() then
    # does nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    t = threading.Thread(target=interrupter)
    t.start()
    got, b, interrupts = [], None, 0
    try:
        while len(got) < len(want):
            try:
                with gate:
                    armed[0] = True
                for b in feed:
                    if not got or got[-1] != b.sequence:
                        got.append(b.sequence)
                    if interrupts == 0 and len(got) % 97 == 0:
                        # A machine busy enough may run the whole feed
                        # before the interrupter's thread gets a turn: then
                        # one interrupt is waited for here, between batches.
                        wait_for_the_interrupter()
                with gate:
                    armed[0] = False
                time.sleep(0.01)  # an interrupt told already arrives here
            except KeyboardInterrupt:
                interrupts += 1
                if b is not None and (not got or got[-1] != b.sequence):
                    got.append(b.sequence)  # came after next() returned it
                if len(got) < len(want):
                    st = feed.state_dict()
                    assert (st["epoch"], st["batch"]) == positions[len(got)]
    finally:
        done.set()
        t.join()
        signal.signal(signal.SIGINT, previous)
    assert got == want
    assert interrupts > 0


def test_the_python_path_passes_this_suite_too():
    # Where the C part serves next(), this file runs again without it.
    from a2pack import feed as F

    if F._core is None:
        pytest.skip("this run is the Python path")
    env = {**os.environ, "A2PACK_FEEDCORE": "0"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        __file__, "-k", "not python_path_passes"],
                       env=env, cwd=pathlib.Path(__file__).parent, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout


def test_a_c_part_that_does_not_load_is_named_and_python_serves(ds, tmp_path):
    # A damaged (or foreign) _feedcore beside the library: import says so
    # and the feed still works.
    from a2pack._native import library_path

    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    shutil.copy(library_path, lib_dir / "liba2pack.so")
    (lib_dir / "_feedcore.abi3.so").write_bytes(b"not an ELF file")
    code = (
        "import warnings, sys\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    import a2pack, a2pack.feed as F\n"
        "msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]\n"
        "assert any('_feedcore.abi3.so does not load' in m for m in msgs), msgs\n"
        "ds = a2pack.Dataset(sys.argv[1])\n"
        "f = a2pack.Feed(ds, batch_size=16, depth=2)\n"
        "for _ in range(20):\n"
        "    b = next(f)\n"
        "    assert (b['exponents'].shape[0]) == b.rows\n"
        "print('ok', F._core)\n")
    env = {**os.environ, "A2PACK_LIBRARY": str(lib_dir / "liba2pack.so")}
    env.pop("A2PACK_FEEDCORE", None)
    r = subprocess.run([sys.executable, "-c", code, ds.path], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok")
