"""A sharded dataset through the one feed: a2pack.Feed over the dataset's
folder walks the shard stream's block shuffle (the same rows, batch for
batch, for every rank and thread count), keeps its shards within the
budget, and resumes from state_dict() like any feed."""
import numpy as np
import pytest

import a2pack
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
    out = []
    with a2pack.ShardStream(path, batch_size=batch_size, seed=seed, rank=rank, world=world,
                            budget_bytes=BUDGET, columns=("indices",)) as s:
        for _ in range(epochs):
            while (b := s.next_batch()) is not None:
                out.append(b["indices"].copy())
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
