"""a2pack.bag: the sackli-compatible Python API (semantics, errors, pickling)."""

import gc
import os
import pickle
import random
import struct

import numpy as np
import pytest

from a2pack import bag, errors
from a2pack._native import ffi

RECORDS = [b"", b"a", b"bb", b"ccc"] + [b"r%04d" % i * (i % 5) for i in range(4, 57)]


def write(path, records=RECORDS, options=None):
    with bag.Writer(path, options) as w:
        for r in records:
            w.write(r)
    return path


@pytest.fixture(params=["bag", "bagz"])
def reader(tmp_path, request):
    return bag.Reader(write(str(tmp_path / f"data.{request.param}")))


# ---------------------------------------------------------------- sequence

def test_len_index_negative(reader):
    assert len(reader) == len(RECORDS)
    for i in range(-len(RECORDS), len(RECORDS)):
        assert reader[i] == RECORDS[i]
    for bad in (len(RECORDS), -len(RECORDS) - 1, 10**6):
        with pytest.raises(IndexError):
            reader[bad]
    with pytest.raises(errors.OutOfRangeError):
        reader[len(RECORDS)]
    with pytest.raises(TypeError):
        reader["x"]
    assert reader[np.int64(3)] == RECORDS[3]


SLICES = [slice(None), slice(5, None), slice(None, 7), slice(3, 40, 4), slice(None, None, -1),
          slice(40, 3, -3), slice(-5, None), slice(None, -5), slice(-1, -20, -2), slice(100, 200),
          slice(5, 2), slice(0, 0), slice(None, None, 7), slice(-100, 100, 9), slice(2, -2, -1),
          slice(56, None, -56), slice(None, None, 100)]


@pytest.mark.parametrize("s", SLICES, ids=str)
def test_slices_match_list_semantics(reader, s):
    view = reader[s]
    want = RECORDS[s]
    assert isinstance(view, bag.Reader)
    assert len(view) == len(want)
    assert list(view) == want
    assert view.read() == want
    for i in range(-len(want), len(want)):
        assert view[i] == want[i]
    # Slices of slices.
    for s2 in (slice(None, None, -1), slice(1, None, 2), slice(-3, None)):
        assert list(view[s2]) == want[s2]
        assert view[s2].read_indices(list(range(len(want[s2])))) == want[s2]


def test_iteration_reversed_contains_count_index(reader):
    assert list(reader) == RECORDS
    assert list(reversed(reader)) == RECORDS[::-1]
    assert b"ccc" in reader and "bb" in reader and b"zzz" not in reader
    assert reader.count(b"") == RECORDS.count(b"")
    assert reader.index(b"ccc") == 3
    assert reader.index(RECORDS[20], 10, 30) == RECORDS.index(RECORDS[20], 10, 30)
    with pytest.raises(ValueError):
        reader.index(b"zzz")
    with pytest.raises(ValueError):
        reader.index(b"a", 2)


def test_read_indices_forms(reader):
    idx = [5, 0, 5, 56, -1, -56]
    want = [RECORDS[i] for i in idx]
    assert reader.read_indices(idx) == want
    assert reader.read_indices(np.array(idx, dtype=np.int64)) == want
    assert reader.read_indices(np.array([5, 0, 7], dtype=np.uint64)) == [RECORDS[5], RECORDS[0], RECORDS[7]]
    assert reader.read_indices(np.array([5, 0, 7], dtype=np.int32)) == [RECORDS[5], RECORDS[0], RECORDS[7]]
    assert reader.read_indices(slice(2, 9, 3)) == RECORDS[2:9:3]
    assert reader.read_indices([]) == []
    with pytest.raises(IndexError, match=r"indices\[1\] = 57"):
        reader.read_indices([0, 57])
    with pytest.raises(IndexError):
        reader.read_indices([-58])
    with pytest.raises(TypeError):
        reader.read_indices([1.5])
    assert reader.read_range(3, 4) == RECORDS[3:7]
    assert list(reader.read_range_iter(3, 4)) == RECORDS[3:7]
    with pytest.raises(IndexError):
        reader.read_range(50, 10)


def test_read_indices_iter_keeps_order_with_read_ahead(reader):
    rng = np.random.default_rng(7)
    idx = rng.integers(-len(RECORDS), len(RECORDS), size=3000).tolist()
    for ra in (None, 1, 3, 64, 5000):
        got = list(reader.read_indices_iter(iter(idx), read_ahead=ra))
        assert got == [RECORDS[i] for i in idx]
    # An infinite generator is consumed lazily.
    def forever():
        i = 0
        while True:
            yield i % len(RECORDS)
            i += 1
    it = reader.read_indices_iter(forever())
    assert [next(it) for _ in range(200)] == [RECORDS[i % len(RECORDS)] for i in range(200)]
    # Errors surface while iterating.
    with pytest.raises(IndexError):
        list(reader.read_indices_iter([0, 1, 999]))
    # On a slice, positions are the slice's.
    view = reader[::-2]
    assert list(view.read_indices_iter([0, 1, 2])) == RECORDS[::-2][:3]


def test_approximate_bytes_per_record(tmp_path):
    r = bag.Reader(write(str(tmp_path / "a.bag")))
    assert r.approximate_bytes_per_record() == pytest.approx(sum(map(len, RECORDS)) / len(RECORDS))
    assert r[3:9].approximate_bytes_per_record() == r.approximate_bytes_per_record()
    assert bag.Reader(write(str(tmp_path / "e.bag"), [])).approximate_bytes_per_record() == 0.0


def test_pickle_reopens_same_files(reader):
    for r in (reader, reader[3:30:4], reader[::-1]):
        p = pickle.loads(pickle.dumps(r))
        assert isinstance(p, bag.Reader)
        assert list(p) == list(r)
        assert p.file_spec == r.file_spec
    opts = bag.Reader.Options(limits_storage=bag.LimitsStorage.IN_MEMORY,
                              compression=bag.CompressionZstd(dictionary=b"xyz"))
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_pickle_in_multiprocessing_worker(tmp_path):
    import multiprocessing as mp
    r = bag.Reader(write(str(tmp_path / "mp.bagz")))
    # Warm the read-ahead pool in the parent so a forked child must make its own.
    assert list(r)[:2] == RECORDS[:2]
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        got = pool.map(_read_all, [r, r[10:20]])
    assert got == [RECORDS, RECORDS[10:20]]


def _read_all(r):
    return list(r)


# ---------------------------------------------------------------- writer

def test_writer_str_records_flush_close_twice(tmp_path):
    p = str(tmp_path / "w.bag")
    w = bag.Writer(p)
    w.write("héllo")
    w.write(bytearray(b"ba"))
    w.write(memoryview(b"mv"))
    w.flush()
    assert not os.path.exists(p)  # appears only at close
    w.close()
    w.close()
    with pytest.raises(ValueError):
        w.write(b"late")
    assert bag.Reader(p).read() == ["héllo".encode(), b"ba", b"mv"]


def test_writer_exception_in_with_block_leaves_nothing(tmp_path):
    for placement in bag.LimitsPlacement:
        p = tmp_path / "x.bagz"
        with pytest.raises(RuntimeError):
            with bag.Writer(p, bag.Writer.Options(limits_placement=placement)) as w:
                for i in range(20000):
                    w.write(b"%d" % i)
                raise RuntimeError("stop")
        assert os.listdir(tmp_path) == []


def test_writer_never_closed_leaves_nothing(tmp_path):
    w = bag.Writer(tmp_path / "y.bag")
    w.write(b"abc")
    del w
    import gc
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_writer_many_records_batches(tmp_path):
    recs = [os.urandom(i % 300) for i in range(30000)]
    for ext in ("bag", "bagz"):
        p = str(tmp_path / f"m.{ext}")
        write(p, recs)
        r = bag.Reader(p)
        assert len(r) == len(recs)
        assert r.read() == recs


def test_writer_mixed_sizes_keep_order(tmp_path):
    # Small records are grouped, large ones go in calls of their own, on a
    # background thread: the order must survive every switch between them.
    rng = random.Random(5)
    sizes = [0, 1, 70 << 10, 3, 3 << 20, 5, 2 << 20, 0] + [rng.choice([10, 1000, 40000, 300000])
                                                        for _ in range(400)]
    recs = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    for ext in ("bag", "bagz"):
        for durable, direct in ((True, True), (False, True), (True, False)):
            p = str(tmp_path / f"mix-{durable}-{direct}.{ext}")
            write(p, recs, bag.Writer.Options(durable=durable, direct_io=direct))
            assert bag.Reader(p).read() == recs
    files = [open(tmp_path / f"mix-{d}-{x}.bag", "rb").read()
             for d, x in ((True, True), (False, True), (True, False))]
    assert files[0] == files[1] == files[2]
    assert bag.Writer.Options(direct_io=False).direct_io is False
    assert bag.Writer.Options().direct_io is True


def test_writer_error_in_background_batch_is_raised(tmp_path):
    w = bag.Writer(tmp_path / "e.bag")
    w.write(b"abc")
    w._w, real = ffi.NULL, w._w  # the next library call fails
    try:
        with pytest.raises(errors.InvalidArgumentError):
            w.flush()
    finally:
        w._w = real
    w._abandon()
    assert os.listdir(tmp_path) == []


def test_writer_options_and_example_bytes(tmp_path):
    p = str(tmp_path / "example.bag")
    write(p, [b"abcdef", b"123", b"catcat"])
    assert open(p, "rb").read() == b"abcdef123catcat" + struct.pack("<3Q", 6, 9, 15)
    p = str(tmp_path / "sep.bagz")
    o = bag.Writer.Options(limits_placement=bag.LimitsPlacement.SEPARATE,
                           compression=bag.CompressionZstd(level=19))
    write(p, RECORDS, o)
    assert os.path.getsize(tmp_path / "limits.sep.bagz") == 8 * len(RECORDS)
    with pytest.raises(errors.CorruptError):
        bag.Reader(p)  # TAIL by default: the file's end is not a limits section
    r = bag.Reader(p, bag.Reader.Options(limits_placement=bag.LimitsPlacement.SEPARATE))
    assert r.read() == RECORDS
    with pytest.raises(TypeError):
        bag.Writer.Options(compression="zstd")
    with pytest.raises(errors.InvalidArgumentError):
        bag.Writer(str(tmp_path / "bad.bagz"), bag.Writer.Options(compression=bag.CompressionZstd(level=1000)))


def test_dictionary_round_trip(tmp_path):
    d = "the quick brown fox " * 50
    p = str(tmp_path / "d.bagz")
    write(p, RECORDS, bag.Writer.Options(compression=bag.CompressionZstd(level=3, dictionary=d)))
    r = bag.Reader(p, bag.Reader.Options(compression=bag.CompressionZstd(dictionary=d)))
    assert r.read() == RECORDS


# ---------------------------------------------------------------- options

@pytest.mark.parametrize("cache", list(bag.CachePolicy))
@pytest.mark.parametrize("access", list(bag.AccessPattern))
@pytest.mark.parametrize("storage", list(bag.LimitsStorage))
def test_reader_options(tmp_path, cache, access, storage):
    p = write(str(tmp_path / "o.bagz"))
    r = bag.Reader(p, bag.Reader.Options(cache_policy=cache, access_pattern=access,
                                         limits_storage=storage, max_parallelism=2))
    assert r.read() == RECORDS
    assert r.read_indices([50, 1, 2]) == [RECORDS[50], RECORDS[1], RECORDS[2]]


def test_enums_are_enums():
    assert bag.LimitsPlacement.TAIL.name == "TAIL"
    assert bag.LimitsPlacement(1) is bag.LimitsPlacement.SEPARATE
    assert set(bag.ShardingLayout.__members__) == {"CONCATENATED", "INTERLEAVED"}
    assert set(bag.CachePolicy.__members__) == {"SYSTEM", "DROP_AFTER_READ", "DIRECT_IO"}
    assert bag.Reader.Options().compression == bag.CompressionAutoDetect()
    assert bag.CompressionZstd().level == 0 and bag.CompressionZstd().dictionary == ""


# ---------------------------------------------------------------- sharding

def _shards(tmp_path, sizes, ext, name):
    n = len(sizes)
    g = 0
    for s, size in enumerate(sizes):
        recs = []
        for _ in range(size):
            recs.append(b"%d" % g)
            g += 1
        write(str(tmp_path / f"{name}-{s:05d}-of-{n:05d}.{ext}"), recs)


def test_concatenated_example_table(tmp_path):
    _shards(tmp_path, [8, 4, 0, 5], "bag", "c")
    for spec in (f"{tmp_path}/c@4.bag", f"{tmp_path}/c@*.bag",
                 [str(tmp_path / f"c-{i:05d}-of-00004.bag") for i in range(4)],
                 ",".join(str(tmp_path / f"c-{i:05d}-of-00004.bag") for i in range(4))):
        r = bag.Reader(spec)
        assert len(r) == 17
        assert r.read() == [b"%d" % i for i in range(17)]
        assert r[8] == b"8" and r[12] == b"12" and r[16] == b"16"


def test_interleaved_example_table(tmp_path):
    # Shard s holds global indices s, s+3, s+6, ...
    sizes = [6, 6, 5]
    for s, size in enumerate(sizes):
        write(str(tmp_path / f"i-{s:05d}-of-00003.bagz"), [b"%d" % (3 * k + s) for k in range(size)])
    o = bag.Reader.Options(sharding_layout=bag.ShardingLayout.INTERLEAVED)
    r = bag.Reader(f"{tmp_path}/i@3.bagz", o)
    assert len(r) == 17
    assert r.read() == [b"%d" % i for i in range(17)]
    assert r[15] == b"15" and r[16] == b"16" and r[7] == b"7"
    assert pickle.loads(pickle.dumps(r)).read() == r.read()


def test_interleaved_rejects_uneven(tmp_path):
    _shards(tmp_path, [2, 5], "bag", "u")
    with pytest.raises(ValueError, match="never increase"):
        bag.Reader(f"{tmp_path}/u@2.bag",
                   bag.Reader.Options(sharding_layout=bag.ShardingLayout.INTERLEAVED))


# ---------------------------------------------------------------- bad input

def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.bag"):
        bag.Reader(str(tmp_path / "missing.bag"))
    _shards(tmp_path, [1], "bag", "s")
    os.rename(tmp_path / "s-00000-of-00001.bag", tmp_path / "s-00000-of-00002.bag")
    with pytest.raises(FileNotFoundError, match="s-00001-of-00002.bag"):
        bag.Reader(f"{tmp_path}/s@2.bag")
    p = write(str(tmp_path / "l.bag"), [b"abc"])
    with pytest.raises(FileNotFoundError, match="limits.l.bag"):
        bag.Reader(p, bag.Reader.Options(limits_placement=bag.LimitsPlacement.SEPARATE))
    # Truncated limits.
    t = tmp_path / "t.bag"
    t.write_bytes(open(write(str(tmp_path / "full.bag")), "rb").read()[:-3])
    with pytest.raises(errors.CorruptError, match="t.bag"):
        bag.Reader(str(t))
    # Decreasing limits: named shard and record.
    d = tmp_path / "dec.bag"
    d.write_bytes(b"aaaabbbbcccc" + struct.pack("<4Q", 4, 10, 8, 12))
    r = bag.Reader(str(d))
    assert r[0] == b"aaaa"
    with pytest.raises(errors.CorruptError, match=r"dec.bag: record 2"):
        r[2]
    with pytest.raises(ValueError, match="record 2"):
        bag.Reader(str(d), bag.Reader.Options(limits_storage=bag.LimitsStorage.IN_MEMORY))
    # Limits past the records section.
    q = tmp_path / "past.bag"
    q.write_bytes(b"aaaa" + struct.pack("<2Q", 400, 4))
    with pytest.raises(errors.CorruptError, match="record 0"):
        bag.Reader(str(q))[0]
    # A corrupt zstd frame.
    z = tmp_path / "z.bagz"
    write(str(z), [b"x" * 500, b"fine"])
    raw = bytearray(z.read_bytes())
    raw[0] ^= 0xFF
    z.write_bytes(bytes(raw))
    rz = bag.Reader(str(z))
    assert rz[1] == b"fine"
    with pytest.raises(errors.CorruptError, match="z.bagz: record 0"):
        rz[0]
    with pytest.raises(errors.CorruptError):
        list(rz)


# ---------------------------------------------------------------- indexes

def test_index_and_multi_index(tmp_path):
    keys = [b"k1", b"k2", b"k1", b"", b"k3", b"k1"]
    r = bag.Reader(write(str(tmp_path / "keys.bag"), keys))
    idx = bag.Index(r)
    assert idx[b"k1"] == 0 and idx["k3"] == 4 and idx[b""] == 3
    assert idx.get(b"nope") is None
    assert b"k2" in idx and b"nope" not in idx
    assert len(idx) == 4
    with pytest.raises(KeyError):
        idx[b"nope"]
    m = bag.MultiIndex(r)
    assert m[b"k1"] == [0, 2, 5]
    assert m.get(b"nope") is None and m.get(b"nope", []) == []
    assert len(m) == 4
    # On a slice, positions are the slice's.
    m2 = bag.MultiIndex(r[::-1])
    assert m2[b"k1"] == [0, 3, 5]
    assert bag.Index(r[1:])[b"k1"] == 1


def test_writer_survives_a_forked_child_dropping_its_copy(tmp_path):
    # A child forked mid-write (a data-loader worker, say) cannot write or
    # commit the parent's file, and dropping its copy neither deletes the
    # parent's temporary file nor waits for the parent's writer thread.
    path = tmp_path / "forked.bag"
    w = bag.Writer(str(path))
    for i in range(3000):
        w.write(b"%05d" % i * 50)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            w.write(b"child")
            try:
                w.flush()
            except errors.ClosedError:
                code = 0
            w._abandon()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    w.write(b"last")
    w.close()
    r = bag.Reader(str(path))
    assert len(r) == 3001 and r[0] == b"00000" * 50 and r[-1] == b"last"


def test_large_record_reads_report_damage(tmp_path):
    """The direct-fill read path (records >= 8 KiB) raises like the batch
    path: a damaged zstd block names the file and record, an index out of
    range is an IndexError, and the good records still read."""
    recs = [random.Random(i).randbytes(20000) for i in range(6)]  # incompressible: stored large
    z = tmp_path / "big.bagz"
    write(str(z), recs)
    raw = bytearray(z.read_bytes())
    # Record 2's frame: keep its header (so its size is known), damage the block.
    limits = struct.unpack_from("<6Q", raw, len(raw) - 48)
    for k in range(limits[1] + 8, limits[2]):
        raw[k] ^= 0x5A
    z.write_bytes(bytes(raw))
    r = bag.Reader(str(z))
    assert r._h.fill_direct
    assert r.read_indices([0, 5, 1]) == [recs[0], recs[5], recs[1]]
    with pytest.raises(errors.CorruptError, match="big.bagz: record 2"):
        r.read_indices([0, 2, 1])
    with pytest.raises(IndexError, match=r"indices\[1\] = 6"):
        r.read_indices([0, 6])
    with pytest.raises(errors.CorruptError, match="record 2"):
        list(r)


@pytest.mark.parametrize("shards", [1, 3])
def test_iterators_of_a_mapped_reader_outlive_the_reader(tmp_path, shards):
    # Stored records are copied out of the mapping one at a time, as the
    # iterator reaches them: the mapping must live as long as the iterator,
    # however the Reader object went.
    records = [bytes([i % 251]) * (3000 + i) for i in range(400)]
    if shards == 1:
        spec = str(tmp_path / "one.bag")
        with bag.Writer(spec) as w:
            for x in records:
                w.write(x)
    else:
        spec = [str(tmp_path / f"part{k}.bag") for k in range(shards)]
        for k, path in enumerate(spec):
            with bag.Writer(path) as w:
                for x in records[k * 150:(k + 1) * 150]:
                    w.write(x)
    r = bag.Reader(spec)
    whole, strided, backwards = iter(r), iter(r[1::3]), iter(reversed(r))
    first = next(whole)
    half = iter(r[100:300])
    del r
    gc.collect()
    assert [first, *whole] == records
    assert list(strided) == records[1::3]
    assert list(backwards) == records[::-1]
    assert next(half) == records[100]
    del half
    gc.collect()
