"""The data logger called as the original logger design calls it:
register_stream's positional signature, and stream labels as dictionary-encoded Parquet columns that
DuckDB, pandas or pyarrow filter on."""

import numpy as np
import pytest

import a2pack
from a2pack import logger

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def write_log(path):
    with a2pack.DataLogger(path) as log:
        a = log.register_stream({"entity": "cell-0", "measure": "v"}, 1.0, 0.5)  # positional
        b = log.register_stream({"entity": "cell-1", "measure": "v", "rep": 3}, 1.0, 0.5)
        c = log.register_stream({}, epoch_scale=1.0, value_scale=0.5)  # no labels
        for i in range(30):
            sid = (a, b, c)[i % 3]
            log.record(sid, float(i), np.array([i, i + 1], np.uint32), np.array([1.0, 2.0]))
    return a, b, c


def test_register_stream_positional_and_keyword(tmp_path):
    a, b, c = write_log(tmp_path / "log")
    data = logger.decode(tmp_path / "log")
    assert data.streams[a].labels == {"entity": "cell-0", "measure": "v"}
    assert data.streams[b].epoch_scale == 1.0 and data.streams[b].value_scale == 0.5
    assert len(data) == 30
    with a2pack.DataLogger(tmp_path / "log2") as log:
        with pytest.raises(TypeError, match="value_scale"):
            log.register_stream({"x": 1}, 1.0)
        with pytest.raises(TypeError, match="epoch_scale, value_scale"):
            log.register_stream({"x": 1})


def test_label_columns_are_dictionary_encoded_and_filterable(tmp_path):
    a, b, c = write_log(tmp_path / "log")
    data = logger.decode(tmp_path / "log")
    plain = data.to_arrow()
    assert [f.name for f in plain.schema] == ["stream_id", "epoch", "indices", "values"]
    t = data.to_arrow(label_columns=True)
    assert [f.name for f in t.schema][4:] == ["label_entity", "label_measure", "label_rep"]
    assert pa.types.is_dictionary(t.schema.field("label_entity").type)
    ids = t.column("stream_id").to_pylist()
    ent = t.column("label_entity").to_pylist()
    rep = t.column("label_rep").to_pylist()
    want = {a: "cell-0", b: "cell-1", c: None}
    assert ent == [want[s] for s in ids]
    assert rep == [("3" if s == b else None) for s in ids]  # non-strings as JSON text
    out = tmp_path / "log.parquet"
    data.to_parquet(out, label_columns=True)
    back = pq.read_table(out, filters=[("label_entity", "=", "cell-0")])
    assert back.num_rows == 10
    assert set(back.column("stream_id").to_pylist()) == {a}
    duckdb = pytest.importorskip("duckdb")
    n = duckdb.sql(f"SELECT count(*) FROM '{out}' WHERE label_entity = 'cell-0'").fetchall()[0][0]
    assert n == 10


def test_label_columns_through_the_module_cli(tmp_path):
    write_log(tmp_path / "log")
    out = tmp_path / "cli.parquet"
    assert logger.main(["to-parquet", str(tmp_path / "log"), str(out), "--label-columns"]) == 0
    t = pq.read_table(out)
    assert "label_entity" in t.schema.names
    assert logger.main(["to-parquet", str(tmp_path / "log"), str(tmp_path / "p2.parquet")]) == 0
    assert "label_entity" not in pq.read_table(tmp_path / "p2.parquet").schema.names


def test_label_columns_of_an_empty_log(tmp_path):
    with a2pack.DataLogger(tmp_path / "log") as log:
        log.register_stream({"entity": "x"}, 1.0, 1.0)
    t = logger.decode(tmp_path / "log").to_arrow(label_columns=True)
    assert t.num_rows == 0 and "label_entity" in t.schema.names
