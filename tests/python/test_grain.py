"""a2pack.grain: grain data sources over step datasets and record files,
grain pipelines and DataLoader workers over them, grain's own checkpoints
restoring exactly, and batches reaching jax without a copy. `make test`
installs grain and jax; the module is skipped only where grain is missing."""

import numpy as np
import pytest

import a2pack

grain = pytest.importorskip("grain")
# grain's worker processes read absl flags, which a program run outside
# absl.app (pytest, a plain script) has not parsed: take their defaults.
from absl import flags  # noqa: E402

if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()
from a2pack.grain import RecordSource, StepSource, to_jax  # noqa: E402

from test_dataset import make_run, write_runs  # noqa: E402


@pytest.fixture(scope="module")
def ds_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grainds")
    write_runs(tmp / "runs", [make_run(s, 20 + 7 * s) for s in range(10)])
    a2pack.build_dataset(tmp / "runs", tmp / "ds")
    return tmp / "ds"


def test_row_source_matches_the_dataset_and_reads_many_at_once(ds_dir):
    ds = a2pack.Dataset(ds_dir)
    src = StepSource(ds_dir)
    assert len(src) == len(ds)
    exps, moves, legal, ev = ds.get_batch_columns(np.arange(len(ds)))
    items = src.__getitems__([3, 0, 3, len(ds) - 1])
    for j, i in enumerate([3, 0, 3, len(ds) - 1]):
        assert np.array_equal(items[j]["exponents"], exps[i]) and items[j]["moves"] == moves[i]
        assert np.array_equal(src[i]["ev_values"], ev[i])
    with pytest.raises(IndexError):
        src[len(ds)]


def test_batch_source_items_are_sampler_batches(ds_dir):
    ds = a2pack.Dataset(ds_dir)
    src = StepSource(ds_dir, batch_size=16, seed=4)
    s = ds.sampler(batch_size=16, seed=4)
    assert len(src) == len(s)
    for b in range(len(s)):
        assert np.array_equal(src[b]["exponents"], ds.get_batch_columns(s.batch(b))[0])


def _ids(ds_dir, item):
    return item["exponents"].tobytes() + item["moves"].tobytes()


def test_map_dataset_checkpoint_restores_exactly(ds_dir):
    src = StepSource(ds_dir, batch_size=8, seed=1)
    ds = grain.MapDataset.source(src).shuffle(seed=5).repeat(3).map(lambda x: x)
    it = iter(ds.to_iter_dataset())
    whole = [_ids(ds_dir, next(it)) for _ in range(len(src) * 2)]
    it = iter(ds.to_iter_dataset())
    for _ in range(7):
        next(it)
    state = it.get_state()
    it2 = iter(ds.to_iter_dataset())
    it2.set_state(state)
    assert [_ids(ds_dir, next(it2)) for _ in range(len(whole) - 7)] == whole[7:]


def test_dataloader_with_workers_checkpoint_restores_exactly(ds_dir):
    src = StepSource(ds_dir, batch_size=8, seed=1)
    sampler = grain.samplers.IndexSampler(num_records=len(src), shard_options=grain.sharding.NoSharding(),
                                           shuffle=True, num_epochs=2, seed=3)
    def loader():
        return grain.DataLoader(data_source=src, sampler=sampler, worker_count=2)
    whole = [_ids(ds_dir, x) for x in loader()]
    assert len(whole) == 2 * len(src)
    it = iter(loader())
    for _ in range(5):
        next(it)
    state = it.get_state()
    it2 = iter(loader())
    it2.set_state(state)
    assert [_ids(ds_dir, x) for x in it2] == whole[5:]


def test_record_source_reads_records(tmp_path):
    from a2pack import bag
    path = tmp_path / "r.bag"
    with bag.Writer(path) as w:
        for i in range(20):
            w.write(b"rec%d" % i)
    src = RecordSource(path)
    assert len(src) == 20 and src[4] == b"rec4"
    assert src.__getitems__([2, 19, 2]) == [b"rec2", b"rec19", b"rec2"]
    ds = grain.MapDataset.source(src).shuffle(seed=1)
    assert sorted(ds[i] for i in range(20)) == sorted(b"rec%d" % i for i in range(20))


def test_batches_reach_jax_without_a_copy(ds_dir):
    jnp = pytest.importorskip("jax.numpy")
    batch = StepSource(ds_dir, batch_size=16)[0]
    arrays = to_jax(batch)
    for k, v in batch.items():
        assert np.array_equal(np.asarray(arrays[k]), v)
    # zero copy: the jax array's buffer is the numpy array's memory
    ev = batch["ev_values"]
    got = arrays["ev_values"]
    assert got.unsafe_buffer_pointer() == ev.__array_interface__["data"][0]
    assert float(jnp.sum(got)) == pytest.approx(float(ev.sum()))


def test_pack_source_reads_entries_and_pickles(tmp_path):
    import pickle

    from a2pack.grain import PackSource
    runs = [make_run(s, 5 + s) for s in range(7)]
    write_runs(tmp_path / "runs", runs)
    a2pack.pack_dir(tmp_path / "runs", tmp_path / "p.a2pack", workers=1)
    src = PackSource(tmp_path / "p.a2pack")
    reader = a2pack.PackReader(str(tmp_path / "p.a2pack"))
    assert len(src) == len(reader) == 7
    want = [reader.read(i) for i in range(7)]
    assert src[3] == want[3]
    assert src.__getitems__([6, 0, 6]) == [want[6], want[0], want[6]]
    # Each item is a whole run's payload, which RunV2 decodes.
    assert sorted(a2pack.RunV2.from_bytes(src[i]).meta.steps for i in range(7)) == list(range(5, 12))
    # A worker process gets the path and opens its own reader.
    copy = pickle.loads(pickle.dumps(src))
    assert [copy[i] for i in range(7)] == want
    ds = grain.MapDataset.source(src).shuffle(seed=3)
    assert sorted(ds[i] for i in range(7)) == sorted(want)
