"""a2pack.bag behaves as bagz where code could notice:
repeated indices share one object, read_indices_iter yields up to a bad
position then raises there, half-consumed iterators die quietly, slice step 0
is an "Invalid slice" IndexError, "posix:" paths, and batch reads from many
threads on one reader. Each behaviour is checked against the `bagz` package
where it has it."""

import concurrent.futures
import gc
import itertools
import pathlib
import warnings

import numpy as np
import pytest

from a2pack import bag, errors

bagz = pytest.importorskip("bagz")

RECORDS = [b"rec-%03d" % i * (1 + i % 7) for i in range(40)] + [b""]


def _write(m, path, records=RECORDS):
    with m.Writer(str(path)) as w:
        for r in records:
            w.write(r)
    return str(path)


@pytest.fixture(params=["bag", "bagz"])
def paths(tmp_path, request):
    """(our reader, bagz reader) over the same file written by bagz."""
    p = _write(bagz, tmp_path / f"data.{request.param}")
    return bag.Reader(p), bagz.Reader(p)


# ---------------------------------------------------------------- repeats

@pytest.mark.parametrize("make", [list, lambda x: np.array(x, dtype=np.int32),
                                  lambda x: np.array(x, dtype=np.int64)],
                         ids=["list", "int32", "int64"])
def test_repeated_index_is_the_same_object(paths, make):
    ours, theirs = paths
    for idx in ([3, 3, 3], [3, 4, 3, 5, 4], [0, 40, 0]):
        a, b = ours.read_indices(make(idx)), theirs.read_indices(make(idx))
        assert a == b
        for i, j in itertools.combinations(range(len(idx)), 2):
            if idx[i] == idx[j]:
                assert b[i] is b[j]  # the peer's behaviour ...
                assert a[i] is a[j]  # ... is ours
    got = list(ours.read_indices_iter([7, 7, 2, 7], read_ahead=8))
    assert got[0] is got[1] is got[3] and got[2] == RECORDS[2]


# ---------------------------------------------------------------- read_indices_iter

def _drain(it):
    out = []
    try:
        for x in it:
            out.append(x)
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return out, type(e)
    return out, None


def _failing_source(n, exc):
    yield from range(n)
    raise exc


CASES = {
    "source-raises-mid-chunk": lambda: _failing_source(5, KeyError("boom")),
    "source-raises-at-chunk-end": lambda: _failing_source(6, KeyError("boom")),
    "source-raises-first": lambda: _failing_source(0, KeyError("boom")),
    "str": lambda: iter([1, 2, "x", 3]),
    "float": lambda: iter([1, 2, 3, 4, 5, 1.5, 3]),
    "past-64-bits": lambda: iter([1, 2, 3, 1 << 70, 3]),
    "out-of-range": lambda: iter([1, 2, 3, 4, 100, 3]),
    "numpy-source": lambda: iter(np.arange(9)),
    "clean": lambda: iter(range(11)),
}
EXPECTED_ERRORS = {"source-raises-mid-chunk": KeyError, "source-raises-at-chunk-end": KeyError,
                   "source-raises-first": KeyError, "str": TypeError, "float": TypeError,
                   "past-64-bits": OverflowError, "out-of-range": IndexError}


@pytest.mark.parametrize("read_ahead", [1, 2, 3, 256])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_read_indices_iter_yields_up_to_the_bad_position(paths, case, read_ahead):
    ours, theirs = paths
    got, err = _drain(ours.read_indices_iter(CASES[case](), read_ahead=read_ahead))
    want, their_err = _drain(theirs.read_indices_iter(CASES[case](), read_ahead=read_ahead))
    assert got == want
    expected = EXPECTED_ERRORS.get(case)
    if expected is None:
        assert err is None and their_err is None
    else:
        assert their_err is not None and issubclass(their_err, expected)
        assert err is not None and issubclass(err, expected), err


def test_read_indices_iter_infinite_source_in_order(paths):
    ours, _ = paths
    it = ours.read_indices_iter(itertools.cycle([5, 1, 9]), read_ahead=4)
    assert list(itertools.islice(it, 10)) == [RECORDS[i] for i in [5, 1, 9] * 3 + [5]]


@pytest.mark.parametrize("kind", ["indices", "range", "iter"])
def test_deleting_half_consumed_iterator_is_quiet(tmp_path, kind, capfd):
    # Records big enough to go through the read-ahead pool (not the mapping).
    records = [bytes([i % 251]) * 20000 for i in range(300)]
    r = bag.Reader(_write(bagz, tmp_path / "big.bagz", records))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(5):
            if kind == "indices":
                it = r.read_indices_iter(itertools.cycle(range(300)), read_ahead=7)
            elif kind == "range":
                it = r.read_range_iter(0, 300)
            else:
                it = iter(r)
            assert next(it) == records[0]
            next(it)
            del it
            gc.collect()
    err = capfd.readouterr().err
    assert "Exception ignored" not in err and "Traceback" not in err, err


# ---------------------------------------------------------------- slices

@pytest.mark.parametrize("s", [slice(None, None, 0), slice(1, 5, 0), slice(-3, None, 0)], ids=str)
def test_step_zero_is_invalid_slice(paths, s):
    ours, theirs = paths
    with pytest.raises(ValueError):  # bagz raises ValueError, as a list does
        theirs[s]
    for call in (lambda: ours[s], lambda: ours.read_indices(s), lambda: ours[::2][s]):
        with pytest.raises(IndexError, match="Invalid slice"):
            call()
        with pytest.raises(ValueError):  # and code written for bagz still catches it
            call()


@pytest.mark.parametrize("s", [slice("Not a number"), slice(0, "x"), slice(None, None, 1.5)],
                         ids=str)
def test_non_integer_bounds_are_invalid_slice(paths, s):
    ours, theirs = paths
    with pytest.raises(TypeError):  # as a list (and bagz) raise
        theirs[s]
    for call in (lambda: ours[s], lambda: ours.read_indices(s), lambda: ours[::2][s]):
        with pytest.raises(IndexError, match="Invalid slice"):  # as sackli raises
            call()
        with pytest.raises(TypeError):  # and code written for lists or bagz still catches it
            call()


@pytest.mark.parametrize("s", [slice(None, None, -1), slice(3, 30, 4), slice(30, 3, -3),
                               slice(-100, 100, 9), slice(10**30, None, -1), slice(None, -10**30),
                               slice(5, 2), slice(None, None, 10**20)], ids=str)
def test_slices_follow_list_semantics(paths, s):
    ours, theirs = paths
    assert list(ours[s]) == RECORDS[s] == list(theirs[s])
    assert ours.read_indices(s) == RECORDS[s]


# ---------------------------------------------------------------- paths

def test_posix_prefixed_paths(tmp_path):
    p = tmp_path / "x.bag"
    _write(bagz, p)
    prefixed = pathlib.Path(f"/posix:{tmp_path}") / "x.bag"
    assert str(prefixed).startswith("/posix:/")
    for spec in (f"posix:{p}", str(prefixed), prefixed, f"posix:{p},{p}"):
        r = bag.Reader(spec)
        assert len(r) == len(RECORDS) * (2 if "," in str(spec) else 1)
        assert r[3] == RECORDS[3]
        assert len(bagz.Reader(str(spec))) == len(r)
    # Sharded specs and writers take the prefix too, for both placements.
    for placement in (bag.LimitsPlacement.TAIL, bag.LimitsPlacement.SEPARATE):
        out = tmp_path / f"w-{placement.name}.bagz"
        with bag.Writer(f"/posix:{out}", bag.Writer.Options(limits_placement=placement)) as w:
            w.write(b"hello")
        assert out.exists() and not (tmp_path / f"posix:{out.name}").exists()
        o = bag.Reader.Options(limits_placement=placement)
        assert list(bag.Reader(f"posix:{out}", o)) == [b"hello"]
        assert list(bagz.Reader(str(out), bagz.Reader.Options(
            limits_placement=getattr(bagz.LimitsPlacement, placement.name)))) == [b"hello"]
    for i in range(2):
        _write(bagz, tmp_path / f"s-{i:05d}-of-00002.bag", RECORDS[i::2])
    assert len(bag.Reader(f"posix:{tmp_path}/s@2.bag")) == len(RECORDS)
    assert len(bag.Reader(f"/posix:{tmp_path}/s@*.bag")) == len(RECORDS)
    # A colon in an ordinary file name is still an ordinary file name.
    odd = tmp_path / "a:b.bag"
    _write(bag, odd)
    assert len(bag.Reader(str(odd))) == len(RECORDS)


# ---------------------------------------------------------------- threads

@pytest.mark.parametrize("cache", list(bag.CachePolicy), ids=lambda c: c.name)
@pytest.mark.parametrize("access", list(bag.AccessPattern), ids=lambda a: a.name)
@pytest.mark.parametrize("ext", ["bag", "bagz"])
def test_batch_reads_from_many_threads(tmp_path, cache, access, ext):
    rng = np.random.default_rng(7)
    # Small and large records (the large ones take the library's fill path).
    records = [bytes(rng.integers(0, 4, size=int(s), dtype=np.uint8))
               for s in rng.choice([0, 1, 700, 9000, 70000], size=400)]
    path = _write(bagz, tmp_path / f"t.{ext}", records)
    for mp in (None, 1, 3):
        r = bag.Reader(path, bag.Reader.Options(max_parallelism=mp, access_pattern=access,
                                                cache_policy=cache))

        def work(seed):
            g = np.random.default_rng(seed)
            for _ in range(6):
                idx = g.integers(0, len(records), size=int(g.integers(1, 300)))
                got = r.read_indices(idx if seed % 2 else idx.tolist())
                assert got == [records[i] for i in idx]
                it = r.read_indices_iter(iter(idx.tolist()), read_ahead=int(g.integers(1, 64)))
                assert list(it) == [records[i] for i in idx]
            start = int(g.integers(0, len(records)))
            assert r[start:].read() == records[start:]
            return True

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            assert all(ex.map(work, range(16)))
