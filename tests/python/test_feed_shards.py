"""A sharded dataset through the one feed: a2pack.Feed over the dataset's
folder walks the shard stream's block shuffle (the same rows, batch for
batch, for every rank and thread count), keeps its shards within the
budget, and resumes from state_dict() like any feed."""
import numpy as np
import pytest

import a2pack
from a2pack._native import check, ffi, lib
from beam_ddp_helpers import write_run_folder

BUDGET = 4 * 300 * 32 + 64  # two windows of two shards of at most 300 rows


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    base = tmp_path_factory.mktemp("feed_shards")
    write_run_folder(base / "runs", 40)
    a2pack.build_dataset(base / "runs", base / "sh", shard_rows=300)
    return base / "sh"


def _feed(path, **kw):
    kw.setdefault("budget_bytes", BUDGET)
    kw.setdefault("pin", "off")
    return a2pack.Feed(path, columns=("boards", "moves", "indices"), **kw)


def _stream_batches(path, *, batch_size, seed, rank=0, world=1, epochs=1):
    """The batches of the C shard stream (a2pack_shard_stream_*: the block
    order read on the caller's thread, without a feed) over the same shards."""
    o = ffi.new("a2pack_shard_stream_options *")
    lib.a2pack_shard_stream_options_init(o)
    o.budget_bytes, o.batch_size, o.seed = BUDGET, batch_size, seed
    o.rank, o.world = rank, world
    h = ffi.new("a2pack_shard_stream **")
    check(lib.a2pack_shard_stream_open(str(path).encode(), o, h))
    s = ffi.gc(h[0], lib.a2pack_shard_stream_close)
    info = ffi.new("a2pack_shard_stream_info *")
    info.size = ffi.sizeof(info[0])
    idx, n = np.empty(batch_size, np.int64), ffi.new("size_t *")
    out = []
    for e in range(epochs):
        check(lib.a2pack_shard_stream_set_epoch(s, e))
        check(lib.a2pack_shard_stream_info_get(s, info))
        for b in range(info.batches):
            check(lib.a2pack_shard_stream_batch_indices(
                s, b, ffi.cast("int64_t *", idx.ctypes.data), n))
            out.append(idx[:n[0]].copy())
    return out


def _take(feed, n):
    got = []
    for _ in range(n):
        b = next(feed)
        got.append((b.epoch, b.batch, b["indices"].copy()))
        del b
    return got


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_the_feed_serves_the_shard_streams_batches(sharded, threads):
    want = _stream_batches(sharded, batch_size=64, seed=7, epochs=2)
    ds = a2pack.Dataset(sharded)
    with _feed(sharded, batch_size=64, seed=7, threads=threads, epochs=2) as f:
        got = [{k: b[k].copy() for k in ("indices", "moves", "boards")} for b in f]
    assert len(got) == len(want)
    for b, w in zip(got, want):
        assert np.array_equal(b["indices"], w)
        rows = ds.get_batch(w)
        assert np.array_equal(b["moves"], rows["move"])
        assert np.array_equal(b["boards"], rows["board"])
    # Every row once per epoch.
    per_epoch = len(want) // 2
    first = np.sort(np.concatenate(want[:per_epoch]))
    assert np.array_equal(first, np.arange(len(ds)))


def test_each_rank_reads_its_own_shards_as_the_stream_deals_them(sharded):
    world = 2
    for rank in range(world):
        want = _stream_batches(sharded, batch_size=32, seed=3, rank=rank, world=world)
        with _feed(sharded, batch_size=64, seed=3, rank=rank, world=world, epochs=1) as f:
            got = [b["indices"].copy() for b in f]
        assert len(got) == len(want)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        assert all(len(g) == 32 for g in got)
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="does not split evenly"):
        _feed(sharded, batch_size=63, world=2)


def test_a_state_resumes_mid_epoch_and_across_the_epoch_boundary(sharded):
    with _feed(sharded, batch_size=50, seed=11) as f:
        per_epoch = f.stats()["batches_per_epoch"]
        ref = _take(f, per_epoch + 6)
    for cut in (3, per_epoch - 1, per_epoch, per_epoch + 2):
        with _feed(sharded, batch_size=50, seed=11, threads=2) as f:
            _take(f, cut)
            state = f.state_dict()
        with _feed(sharded, batch_size=50, seed=11) as g:
            g.load_state_dict(state)
            rest = _take(g, len(ref) - cut)
        for (e, b, i), (we, wb, wi) in zip(rest, ref[cut:]):
            assert (e, b) == (we, wb) and np.array_equal(i, wi)


def test_checkpoints_of_another_order_or_seed_are_refused(sharded):
    ds = a2pack.Dataset(sharded)
    with a2pack.Feed(ds, batch_size=50, pin="off") as f:
        next(f)
        epoch_state = f.state_dict()
    with _feed(sharded, batch_size=50, seed=1) as f:
        with pytest.raises(a2pack.errors.InvalidArgumentError, match="epoch sampler"):
            f.load_state_dict(epoch_state)
        next(f)
        shard_state = f.state_dict()
    with a2pack.Feed(ds, batch_size=50, pin="off") as g:
        with pytest.raises(a2pack.errors.InvalidArgumentError, match="block shuffle"):
            g.load_state_dict(shard_state)
    with _feed(sharded, batch_size=50, seed=2) as h:
        with pytest.raises(a2pack.errors.InvalidArgumentError, match="seed"):
            h.load_state_dict(shard_state)
        assert next(h) is not None  # refused, nothing changed


def test_bad_options_are_refused_naming_them(sharded, tmp_path):
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="budget"):
        _feed(sharded, budget_bytes=1000)
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="shuffle"):
        _feed(sharded, shuffle=False)
    with pytest.raises(a2pack.errors.NotFoundError, match="manifest"):
        _feed(tmp_path / "nothing")
    with pytest.raises(ValueError, match="block shuffle"):
        _feed(sharded, indices=[1, 2, 3])
    with pytest.raises(ValueError, match="sharded dataset"):
        a2pack.Feed(a2pack.Dataset(sharded), budget_bytes=BUDGET)


def test_the_feed_answers_what_an_epoch_loop_asks_of_its_shards(sharded):
    want = _stream_batches(sharded, batch_size=64, seed=5, epochs=2)
    with _feed(sharded, batch_size=64, seed=5) as f:
        per_epoch = f.stats()["batches_per_epoch"]
        info = f.shards_info()
        assert info["batches"] == per_epoch and info["rank_rows"] == len(a2pack.Dataset(sharded))
        assert info["shards"] == info["rank_shards"] > 2 and info["window_shards"] == 2
        # The rows of any batch by number, nothing gathered.
        assert all(np.array_equal(f.batch_indices(k, e), want[e * per_epoch + k])
                   for e in range(2) for k in range(per_epoch))
        assert len(f.batch_indices(per_epoch)) == 0
        # A seek hands out the batch it names next; one past the epoch is refused.
        f.seek(1, 3)
        assert [(e, b) for e, b, _ in _take(f, 2)] == [(1, 3), (1, 4)]
        with pytest.raises(a2pack.errors.InvalidArgumentError, match="no batch"):
            f.seek(0, per_epoch)
        e, b, i = _take(f, 1)[0]
        assert (e, b) == (1, 5) and np.array_equal(i, want[per_epoch + 5])
        after = f.shards_info()
        assert after["loads"] > 0 and after["bytes_read"] > 0
        assert 0 < after["resident_bytes"] <= BUDGET
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="sharded dataset"):
        with a2pack.Feed(a2pack.Dataset(sharded), batch_size=50, pin="off") as g:
            g.shards_info()


def test_a_shard_streams_state_from_before_it_was_a_feed_still_loads(sharded):
    # The C shard stream's state (what ShardStream saved before it was a
    # feed) after four batches: the stream and a feed resume at the fifth.
    o = ffi.new("a2pack_shard_stream_options *")
    lib.a2pack_shard_stream_options_init(o)
    o.budget_bytes, o.batch_size, o.seed = BUDGET, 64, 5
    h = ffi.new("a2pack_shard_stream **")
    check(lib.a2pack_shard_stream_open(str(sharded).encode(), o, h))
    s = ffi.gc(h[0], lib.a2pack_shard_stream_close)
    cols = ffi.new("a2pack_dataset_columns *")
    cols.size = ffi.sizeof(cols[0])
    n = ffi.new("size_t *")
    idx = np.empty(64, np.int64)
    for _ in range(4):
        check(lib.a2pack_shard_stream_next(s, cols, ffi.cast("int64_t *", idx.ctypes.data), n))
    data, size = ffi.new("uint8_t **"), ffi.new("size_t *")
    check(lib.a2pack_shard_stream_state_save(s, data, size))
    old = bytes(ffi.buffer(data[0], size[0]))
    lib.a2pack_free(data[0])
    assert old[:4] == b"A2BS"
    want = _stream_batches(sharded, batch_size=64, seed=5)
    stream = a2pack.ShardStream(sharded, batch_size=64, seed=5, budget_bytes=BUDGET,
                                columns=("indices",))
    stream.load_state_dict({"a2pack_shard_stream": old, "epoch": 0, "next_batch": 4})
    assert stream.info()["next_batch"] == 4
    got = [b["indices"] for b in stream]
    assert len(got) == len(want) - 4 and all(map(np.array_equal, got, want[4:]))
    assert stream.epoch == 1
    with _feed(sharded, batch_size=64, seed=5) as f:
        f.load_state_dict(old)
        e, b, i = _take(f, 1)[0]
        assert (e, b) == (0, 4) and np.array_equal(i, want[4])
