"""Arrow interop: the PyCapsule interface read by pyarrow, Polars and DuckDB,
to_arrow / to_parquet of datasets and packs, values against numpy reads,
zero-copy by buffer address, consumers outliving the handles."""

import gc
import json
import os
import pathlib

import numpy as np
import pytest

import a2pack
from a2pack import bag

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    a2pack.generate_dir(d, 12, seed=5, policy="greedy", max_steps=60)
    return d


@pytest.fixture(scope="module")
def pack_path(runs_dir, tmp_path_factory):
    p = tmp_path_factory.mktemp("pack") / "runs.a2pack"
    a2pack.pack_dir(runs_dir, p)
    return p


@pytest.fixture(scope="module")
def ds_path(pack_path, tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "ds"
    a2pack.build_dataset(pack_path, d)
    return d


# ------------------------------------------------------------------ run batches
def test_run_batch_steps_zero_copy_and_values(fixture_bytes):
    b = a2pack.decode_batch([fixture_bytes, fixture_bytes])
    rb = pa.record_batch(b)
    assert rb.num_rows == b.n_steps
    assert rb.schema.field("board").type == pa.uint64()
    assert rb.schema.field("exponents").type == pa.list_(pa.field("item", pa.uint8(), False), 16)
    assert rb.schema.field("ev_values").type.list_size == 4
    # Zero-copy: the Arrow buffers are the batch's own memory.
    assert rb.column("board").buffers()[1].address == b.boards.ctypes.data
    assert rb.column("move").buffers()[1].address == b.moves.ctypes.data
    assert rb.column("ev_values").values.buffers()[1].address == b.branch_values.ctypes.data
    assert np.array_equal(rb.column("board").to_numpy(), b.boards)
    assert np.array_equal(rb.column("legal_mask").to_numpy(), b.legal_masks)
    ev = rb.column("ev_values").values.to_numpy().reshape(-1, 4)
    assert np.array_equal(ev, b.branch_values)
    run = rb.column("run").to_numpy()
    step = rb.column("step").to_numpy()
    for r in range(2):
        s = b.run_steps(r)
        assert (run[s] == r).all()
        assert np.array_equal(step[s], np.arange(s.stop - s.start))
    # Exponents: cell 0 (top-left) is the board's high nibble.
    exps = rb.column("exponents").values.to_numpy().reshape(-1, 16)
    boards = b.boards
    for c in range(16):
        assert np.array_equal(exps[:, c], (boards >> np.uint64(60 - 4 * c)) & np.uint64(15))


def test_run_batch_export_outlives_handle(fixture_bytes):
    b = a2pack.decode_batch([fixture_bytes])
    expect = b.boards.copy()
    rb = pa.record_batch(b)
    del b
    gc.collect()
    # The export holds the batch: its memory is still the batch's and intact.
    assert np.array_equal(rb.column("board").to_numpy(), expect)
    garbage = [np.full(len(expect), 7, np.uint64) for _ in range(50)]  # reuse freed memory
    assert np.array_equal(rb.column("board").to_numpy(), expect)
    del garbage


def test_run_batch_runs_layout(fixture_bytes):
    b = a2pack.decode_batch([fixture_bytes, fixture_bytes])
    t = pa.table(b.arrow("runs"))
    assert t.num_rows == 2
    assert t.column("max_score").to_pylist() == b.max_score.tolist()
    assert t.column("first_step").to_pylist() == b.step_offsets[:2].tolist()
    assert t.column("engine").to_pylist() == [b.engine(0), b.engine(1)]
    with pytest.raises(ValueError):
        b.arrow("rows")


def test_capsules_directly(fixture_bytes):
    b = a2pack.decode_batch([fixture_bytes])
    schema_cap = b.__arrow_c_schema__()
    assert pa.schema(b).names[:3] == ["run", "step", "board"]
    del schema_cap
    s, a = b.__arrow_c_array__()
    rb = pa.RecordBatch._import_from_c_capsule(s, a)
    assert rb.num_rows == b.n_steps
    # Capsules not consumed are released by their destructors (no leak, no crash).
    b.__arrow_c_array__()
    b.__arrow_c_stream__()
    gc.collect()


def test_polars_and_duckdb_read_a_batch(fixture_bytes):
    b = a2pack.decode_batch([fixture_bytes])
    df = pl.DataFrame(b)
    assert df.height == b.n_steps
    assert df["board"].dtype == pl.UInt64
    # Boards past 2^63 stay exact unsigned integers.
    assert np.array_equal(df["board"].to_numpy(), b.boards)
    counts = duckdb.sql("select move, count(*) as n from b group by move order by move").fetchall()
    expect = np.bincount(b.moves, minlength=4)
    assert [(m, n) for m, n in counts] == [(m, int(expect[m])) for m in range(4) if expect[m]]


# ------------------------------------------------------------------ datasets
def test_dataset_stream_matches_numpy(ds_path):
    ds = a2pack.Dataset(ds_path)
    steps = ds.steps
    t = pa.table(ds)
    assert t.num_rows == len(ds)
    assert np.array_equal(t.column("board").to_numpy(), steps["board"])
    assert np.array_equal(t.column("move").to_numpy(), steps["move"])
    assert np.array_equal(t.column("legal_mask").to_numpy(), steps["ev_legal"])
    assert np.array_equal(t.column("run_id").to_numpy(), steps["run_id"])
    assert np.array_equal(t.column("step_index").to_numpy(), steps["step_index"])
    ev = np.concatenate([c.values.to_numpy() for c in t.column("ev_values").chunks]).reshape(-1, 4)
    assert np.array_equal(ev, steps["ev_values"])
    exps, _, _, _ = ds.get_batch_columns(np.arange(len(ds)))
    got = np.concatenate([c.values.to_numpy() for c in t.column("exponents").chunks])
    assert np.array_equal(got.reshape(-1, 16), exps)


def test_dataset_gather_and_chunks(ds_path):
    ds = a2pack.Dataset(ds_path)
    idx = np.array([5, 0, len(ds) - 1, 5])
    rb = pa.record_batch(ds.arrow_gather(idx))
    assert rb.column("board").to_pylist() == ds.steps["board"][idx].tolist()
    t = ds.to_arrow(chunk_rows=100)
    assert t.num_rows == len(ds)
    assert max(len(c) for c in t.column("board").chunks) == 100
    with pytest.raises(a2pack.OutOfRangeError, match=str(len(ds))):
        pa.record_batch(ds.arrow_gather([len(ds)]))
    with pytest.raises(a2pack.OutOfRangeError):
        ds.to_arrow(indices=[-1])


def test_dataset_filters_pushed_down(ds_path):
    ds = a2pack.Dataset(ds_path)
    t = ds.to_arrow(run_ids=[1, 3])
    assert set(t.column("run_id").to_pylist()) == {1, 3}
    assert t.num_rows == int(np.isin(ds.steps["run_id"], [1, 3]).sum())
    runs = ds.to_arrow("runs")
    scores = sorted(runs.column("max_score").to_pylist())
    lo, hi = scores[3], scores[8]
    t = ds.to_arrow(score=(lo, hi))
    assert t.num_rows == ds.filter_by_score(lo, hi).size
    keep = [r for r, s in zip(runs.column("id").to_pylist(), runs.column("max_score").to_pylist())
            if lo <= s <= hi]
    assert set(t.column("run_id").to_pylist()) == set(keep)
    assert ds.to_arrow("runs", score=(lo, hi)).num_rows == len(keep)
    assert ds.to_arrow(run_ids=[]).num_rows == 0


def test_dataset_stream_outlives_handle(ds_path):
    ds = a2pack.Dataset(ds_path)
    expect = ds.steps["board"].copy()
    reader = pa.RecordBatchReader._import_from_c_capsule(ds.__arrow_c_stream__())
    ds.close()
    del ds
    gc.collect()
    got = np.concatenate([b.column("board").to_numpy() for b in reader])
    assert np.array_equal(got, expect)


def test_dataset_polars_duckdb(ds_path):
    ds = a2pack.Dataset(ds_path)
    df = pl.DataFrame(ds)
    assert df.height == len(ds)
    assert np.array_equal(df["board"].to_numpy(), ds.steps["board"])
    n = duckdb.sql("select count(*) from ds where move = 0").fetchall()[0][0]
    assert n == int((ds.steps["move"] == 0).sum())


def test_dataset_to_parquet(ds_path, tmp_path):
    ds = a2pack.Dataset(ds_path)
    out = tmp_path / "steps.parquet"
    seen = []
    n = ds.to_parquet(out, row_group_size=128, progress=lambda d, t: seen.append((d, t)))
    assert n == len(ds) and seen[-1] == (len(ds), len(ds))
    f = pq.ParquetFile(out)
    assert f.metadata.num_row_groups == -(-len(ds) // 128)
    t = f.read()
    assert np.array_equal(t.column("board").to_numpy(), ds.steps["board"])
    got = duckdb.sql(f"select sum(move::BIGINT) from read_parquet('{out}')").fetchall()[0][0]
    assert got == int(ds.steps["move"].sum())
    ds.to_parquet(tmp_path / "runs.parquet", "runs")
    assert pq.read_table(tmp_path / "runs.parquet").num_rows == ds.num_runs
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


# ------------------------------------------------------------------ packs
def test_pack_runs_and_steps(pack_path):
    pack = a2pack.PackReader(pack_path)
    runs = pack.to_arrow("runs", batch_runs=5)
    batch = pack.decode_batch_columns(range(len(pack)))
    assert runs.column("entry").to_pylist() == list(range(len(pack)))
    assert runs.column("max_score").to_pylist() == batch.max_score.tolist()
    steps = pack.to_arrow("steps", batch_runs=5)
    assert np.array_equal(steps.column("board").to_numpy(), batch.boards)
    entry = steps.column("entry").to_numpy()
    for r in range(len(pack)):
        assert (entry[batch.run_steps(r)] == r).all()
    sub = pack.to_arrow("runs", entries=[7, 2])
    assert sub.column("entry").to_pylist() == [7, 2]
    lo = int(np.median(batch.max_score))
    hi_runs = pack.to_arrow("runs", score=(lo, None))
    assert hi_runs.column("entry").to_pylist() == [i for i in range(len(pack))
                                                   if batch.max_score[i] >= lo]
    hi_steps = pack.to_arrow("steps", score=(lo, None))
    assert set(hi_steps.column("entry").to_pylist()) == set(hi_runs.column("entry").to_pylist())
    assert pl.DataFrame(pack).height == len(pack)
    n = duckdb.sql("select count(*) from pack").fetchall()[0][0]
    assert n == len(pack)


def test_pack_stream_outlives_handle(pack_path):
    pack = a2pack.PackReader(pack_path)
    expect = pack.decode_batch_columns(range(len(pack))).max_score.tolist()
    reader = pa.RecordBatchReader._import_from_c_capsule(pack.__arrow_c_stream__())
    pack.close()
    del pack
    gc.collect()
    t = reader.read_all()
    assert t.column("max_score").to_pylist() == expect
    assert t.column("entry").to_pylist() == list(range(len(expect)))
    with pytest.raises(a2pack.OutOfRangeError, match="99"):
        a2pack.PackReader(pack_path).arrow_stream(entries=[0, 99])


def test_pack_entries_stats_parquet(pack_path, tmp_path):
    pack = a2pack.PackReader(pack_path)
    e = pa.record_batch(pack.arrow_entries())
    assert e.num_rows == len(pack)
    assert e.column("length").to_pylist() == [pack.entry(i).length for i in range(len(pack))]
    stats, hist = pack.arrow_stats()
    s = pa.record_batch(stats).to_pylist()[0]
    st = pack.stats
    assert s["count"] == len(pack) and s["max_len"] == st.max_len
    h = pa.record_batch(hist)
    assert dict(zip(h.column("highest_tile").to_pylist(), h.column("runs").to_pylist())) == \
        st.highest_tile_hist
    out = tmp_path / "steps.parquet"
    rows = pack.to_parquet(out, "steps", row_group_size=100)
    t = pq.read_table(out)
    assert t.num_rows == rows == pack.decode_batch_columns(range(len(pack))).n_steps
    got = duckdb.sql(f"select count(distinct entry) from read_parquet('{out}')").fetchall()[0][0]
    assert got == len(pack)


# ------------------------------------------------------------------ bags and logs
def test_bag_reader_zero_copy_records(tmp_path):
    path = str(tmp_path / "r.bag")
    records = [os.urandom(n) for n in (0, 5, 100, 3000, 1)] * 30
    with bag.Writer(path) as w:
        for r in records:
            w.write(r)
    reader = bag.Reader(path)
    t = pa.table(reader)
    assert t.column("record").type == pa.large_binary()
    assert t.column("record").to_pylist() == records
    rb = a2pack.arrow.bag_batch_arrow(reader._h.ptr, 0, 4)
    del reader
    gc.collect()
    assert rb.column("record").to_pylist() == records[:4]
    # A bag Reader is a Sequence, which pl.DataFrame reads as rows: from_arrow takes the stream.
    assert len(pl.from_arrow(bag.Reader(path))) == len(records)


def test_log_data(tmp_path):
    d = tmp_path / "log"
    with a2pack.DataLogger(d) as log:
        sid = log.register_stream({"name": "loss"}, epoch_scale=1.0, value_scale=1e-3)
        for e in range(20):
            log.record(sid, e, [0, 3], [e * 0.5, -e * 0.25])
    data = a2pack.logger.decode(d)
    t = pa.table(data)
    assert t.num_rows == len(data)
    assert np.array_equal(t.column("epoch").to_numpy(), data.epochs)
    assert np.array_equal(np.concatenate([c.values.to_numpy() for c in t.column("values").chunks]),
                          data.values)
    del data
    gc.collect()
    assert t.column("stream_id").to_pylist() == [sid] * 20
    assert pl.DataFrame(a2pack.logger.decode(d))["epoch"].to_list() == [float(e) for e in range(20)]


# ------------------------------------------------------------------ CLI
def _cli():
    import pathlib
    p = pathlib.Path(os.environ.get("A2PACK_CLI",
                                    pathlib.Path(a2pack.library_path).parent / "a2pack"))
    return p if p.is_file() and os.access(p, os.X_OK) else None


def _child_env():
    import pathlib
    env = dict(os.environ)
    env["A2PACK_LIBRARY"] = a2pack.library_path
    pkg = str(pathlib.Path(a2pack.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([pkg, env.get("PYTHONPATH", "")])
    return env


def test_cli_to_parquet(pack_path, ds_path, tmp_path):
    import subprocess
    import sys
    cli = _cli()
    if cli is None:
        pytest.skip("a2pack CLI not found beside the library (set A2PACK_CLI)")
    out = tmp_path / "runs.parquet"
    r = subprocess.run([str(cli), "to-parquet", str(pack_path), str(out), "--layout", "runs",
                        "--python", sys.executable], env=_child_env(), capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    pack = a2pack.PackReader(pack_path)
    assert f"wrote {len(pack)} rows" in r.stderr
    got = duckdb.sql(f"select entry, max_score from read_parquet('{out}') order by entry").fetchall()
    batch = pack.decode_batch_columns(range(len(pack)))
    assert got == list(enumerate(batch.max_score.tolist()))
    out2 = tmp_path / "steps.parquet"
    r = subprocess.run([str(cli), "to-parquet", str(ds_path), str(out2), "--run-ids", "2,4",
                        "--row-group-size", "50", "--python", sys.executable],
                       env=_child_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    t = pq.read_table(out2)
    ds = a2pack.Dataset(ds_path)
    assert t.num_rows == int(np.isin(ds.steps["run_id"], [2, 4]).sum())
    assert pq.ParquetFile(out2).metadata.num_row_groups == -(-t.num_rows // 50)
    # A missing input is one clear line and status 3, as in every command (a
    # damaged one is status 1); nothing is left behind.
    r = subprocess.run([str(cli), "to-parquet", str(tmp_path / "missing.a2pack"),
                        str(tmp_path / "x.parquet"), "--python", sys.executable],
                       env=_child_env(), capture_output=True, text=True)
    assert r.returncode == 3 and "missing.a2pack" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "x.parquet").exists()
    damaged = tmp_path / "damaged.a2pack"
    data = bytearray(pathlib.Path(pack_path).read_bytes())
    e = a2pack.PackReader(pack_path).entry(1)
    data[e.offset + e.length // 2] ^= 0xFF  # inside entry 1's payload
    damaged.write_bytes(bytes(data))
    r = subprocess.run([str(cli), "to-parquet", str(damaged), str(tmp_path / "x.parquet"),
                        "--python", sys.executable], env=_child_env(), capture_output=True,
                       text=True)
    assert r.returncode == 1 and "damaged.a2pack" in r.stderr, r.stderr
    assert not (tmp_path / "x.parquet").exists()
    r = subprocess.run([str(cli), "to-parquet", str(pack_path), str(tmp_path / "y.parquet"),
                        "--python", str(tmp_path / "no-such-python")], env=_child_env(),
                       capture_output=True, text=True)
    assert r.returncode == 3 and "no-such-python" in r.stderr  # a missing component: exit 3


def test_cli_built_in_a_clone_runs_the_clones_venv(pack_path, tmp_path):
    """A tool built in a clone (build/a2pack beside include/ and .venv/) runs
    the clone's venv for its Python-backed commands without --python or
    $A2PACK_PYTHON, where python3 on PATH may lack the package."""
    cli = _cli()
    if cli is None:
        pytest.skip("a2pack CLI not found beside the library (set A2PACK_CLI)")
    clone = pathlib.Path(cli).resolve().parent.parent
    if not ((clone / "include" / "a2pack.h").is_file() and (clone / ".venv" / "bin" / "python").exists()):
        pytest.skip(f"{cli} is not a tool built in a clone with a .venv")
    env = _child_env()
    env.pop("A2PACK_PYTHON", None)
    env["PATH"] = str(tmp_path)  # no python3 to fall back on
    import subprocess
    out = tmp_path / "runs.parquet"
    r = subprocess.run([str(cli), "to-parquet", str(pack_path), str(out), "--layout", "runs"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert pq.read_table(out).num_rows == len(a2pack.PackReader(pack_path))
