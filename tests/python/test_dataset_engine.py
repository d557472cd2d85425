"""A run without an engine string is stored in metadata.db as upstream's
datapack stores it (`engine_str.unwrap_or_default()`: ''), so `WHERE engine
= ''` selects the same runs in datasets of both tools, through the CLI build,
append and the Python writer."""

import sqlite3

import a2pack
from test_dataset import make_run, write_runs
from test_dataset_foreign import cli


def engines(ds):
    with sqlite3.connect(f"file:{ds / 'metadata.db'}?mode=ro", uri=True) as db:
        return [r[0] for r in db.execute("SELECT engine FROM runs ORDER BY id")]


def test_missing_engine_is_the_empty_string(tmp_path):
    runs = [make_run(1, 5, engine=None), make_run(2, 6, engine="expectimax"),
            make_run(3, 7, engine=None)]
    write_runs(tmp_path / "runs", runs)
    ds = tmp_path / "ds"
    cli("dataset", "build", "--input", tmp_path / "runs", "--output", ds)
    assert engines(ds) == ["", "expectimax", ""]
    d = a2pack.Dataset(ds)
    assert len(d.filter_sql("engine = ?", [""])) == 5 + 7
    assert len(d.filter_sql("engine IS NULL")) == 0
    write_runs(tmp_path / "more", [make_run(4, 3, engine=None)])
    cli("dataset", "append", "--dataset", ds, "--input", tmp_path / "more")
    assert engines(ds) == ["", "expectimax", "", ""]
    py = tmp_path / "py"
    a2pack.build_dataset(tmp_path / "runs", py)
    assert engines(py) == ["", "expectimax", ""]
