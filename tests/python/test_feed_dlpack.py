"""A feed batch's columns as the library's DLPack tensors
(a2pack_feed_batch_dlpack), taken by numpy and torch themselves: the shapes,
dtypes and memory are the batch's, and the ring slot stays with the
consumer until the last array over any column is gone - whichever library
holds it - then goes back to the producers."""
import ctypes
import gc

import numpy as np
import pytest

import a2pack
from a2pack._native import check, ffi, lib
from test_dataset import make_run, write_runs

# Only the capsule is made here (Python's C API, through ctypes): the
# tensor, its shape and its deleter are the library's.
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_KCPU, _KCUDA_HOST = 1, 3


class _Tensor:
    """What from_dlpack takes: an object whose __dlpack__ gives a capsule of
    a versioned tensor (DLPack 1.0), consumed once."""

    def __init__(self, address, device):
        self._capsule = _capsule_new(address, b"dltensor_versioned", None)
        self._device = device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        assert max_version is None or max_version[0] >= 1
        return self._capsule

    def __dlpack_device__(self):
        return (self._device, 0)


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dlpackds")
    write_runs(tmp / "runs", [make_run(s, 30 + 7 * s) for s in range(10)])
    a2pack.build_dataset(tmp / "runs", tmp / "ds")
    return a2pack.Dataset(tmp / "ds")


def _feed(ds, **kw):
    o = ffi.new("a2pack_feed_options *")
    lib.a2pack_feed_options_init(o)
    o.batch_size, o.depth, o.slots, o.pin = 32, 1, 3, lib.A2PACK_FEED_PIN_OFF
    o.columns = (1 << lib.A2PACK_FEED_EXPONENTS) | (1 << lib.A2PACK_FEED_LEGAL) | (
        1 << lib.A2PACK_FEED_BOARDS) | (1 << lib.A2PACK_FEED_MOVES)
    for k, v in kw.items():
        setattr(o, k, v)
    out = ffi.new("a2pack_feed **")
    check(lib.a2pack_feed_open(ds._check_open(), ffi.NULL, 0, o, out))
    return ffi.gc(out[0], lib.a2pack_feed_close)


def _held(f):
    s = ffi.new("a2pack_feed_stats *")
    s.size = ffi.sizeof(s[0])
    check(lib.a2pack_feed_stats_get(f, s))
    return int(s.held)


COLUMNS = ("exponents", "moves", "legal", "boards", "indices")


def _columns(f, make):
    """The next batch's COLUMNS as `make` (from_dlpack) makes them; the
    batch's own reference released at once."""
    b = ffi.new("a2pack_feed_batch **")
    check(lib.a2pack_feed_next(f, b))
    ids = ffi.new("a2pack_feed_column[]", [getattr(lib, f"A2PACK_FEED_{c.upper()}")
                                           for c in COLUMNS])
    t = ffi.new("DLManagedTensorVersioned *[]", len(COLUMNS))
    check(lib.a2pack_feed_batch_dlpack(b[0], ids, len(COLUMNS), t))
    lib.a2pack_feed_batch_release(b[0])
    return {c: make(_Tensor(int(ffi.cast("uintptr_t", t[i])), _KCPU))
            for i, c in enumerate(COLUMNS)}


def test_numpy_reads_the_batch_and_its_arrays_hold_the_slot(ds):
    f = _feed(ds, moves_dtype=lib.A2PACK_FEED_DTYPE_I64)
    cols = _columns(f, np.from_dlpack)
    assert cols["exponents"].shape == (32, 16) and cols["exponents"].dtype == np.uint8
    assert cols["legal"].shape == (32, 4) and cols["legal"].dtype == np.bool_
    assert cols["moves"].dtype == np.int64 and cols["indices"].dtype == np.int64
    assert cols["boards"].dtype == np.uint64 and cols["boards"].shape == (32,)
    rows = ds.get_batch(cols["indices"])
    assert np.array_equal(cols["boards"], rows["board"])
    assert np.array_equal(cols["moves"], rows["move"])
    assert cols["boards"].flags.writeable
    # A view of a column keeps the slot as the column does.
    view = cols["boards"][3:9]
    kept = view.copy()
    assert _held(f) == 1
    for name in COLUMNS:
        del cols[name]
        gc.collect()
        assert _held(f) == 1, name
    del view
    assert _held(f) == 0
    # The slots come round again: more batches than the ring has slots.
    for _ in range(8):
        c = _columns(f, np.from_dlpack)
        assert np.array_equal(c["boards"], ds.get_batch(c["indices"])["board"])
        del c
    assert _held(f) == 0 and kept.size == 6


def test_torch_takes_the_same_tensors_and_keeps_the_slot_past_the_feed(ds):
    torch = pytest.importorskip("torch")
    f = _feed(ds)
    cols = _columns(f, torch.from_dlpack)
    assert cols["exponents"].dtype == torch.uint8 and tuple(cols["exponents"].shape) == (32, 16)
    assert cols["legal"].dtype == torch.bool and cols["indices"].dtype == torch.int64
    boards = cols["boards"]
    want = ds.get_batch(cols["indices"].numpy())["board"]
    assert np.array_equal(boards.numpy(), want)
    del cols
    gc.collect()
    assert _held(f) == 1  # `boards` holds it
    # The feed goes first: the tensor's memory stays the batch's.
    del f
    gc.collect()
    assert np.array_equal(boards.numpy(), want)
    del boards
