"""SQL selections that can be stopped: a filter is any SQL expression, so a
query can run forever (a recursive CTE); Ctrl-C stops it (KeyboardInterrupt),
and so does a deadline (``timeout``), whose error names the query and the
deadline. Normal queries give the same answers with or without limits."""

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import a2pack
from test_dataset import make_run, write_runs

# Matches nothing and never finishes: the CTE counts forever.
ENDLESS = ("id IN (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
           "SELECT x FROM c WHERE x < 0)")


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("query")
    write_runs(d / "runs", [make_run(s, n) for s, n in enumerate([12, 3, 0, 20, 7])])
    a2pack.build_dataset(d / "runs", d / "ds", workers=1)
    return d / "ds"


@pytest.fixture
def ds(ds_path):
    with a2pack.Dataset(ds_path) as d:
        yield d


def test_deadline_stops_an_endless_filter_naming_query_and_deadline(ds):
    with pytest.raises(a2pack.errors.InterruptedError_) as e:
        ds.filter_sql(ENDLESS, timeout=0.25)
    msg = str(e.value)
    assert "metadata.db" in msg and "WITH RECURSIVE c(x)" in msg
    assert "deadline of 0.25 s" in msg
    with pytest.raises(a2pack.errors.InterruptedError_, match=r"deadline of 0\.2 s"):
        ds.run_ids(ENDLESS, timeout=0.2)
    # A split's deadline covers its validation query too.
    with pytest.raises(a2pack.errors.InterruptedError_, match=r"deadline of 0\.2 s"):
        ds.split(val_where=ENDLESS, timeout=0.2)
    # The dataset answers normally afterwards.
    assert len(ds.filter_sql("")) == len(ds)


def test_deadline_applies_in_any_thread(ds):
    caught = []

    def query():
        try:
            ds.filter_sql(ENDLESS, timeout=0.2)
        except a2pack.errors.InterruptedError_ as e:
            caught.append(e)

    t = threading.Thread(target=query)
    t.start()
    t.join()
    assert len(caught) == 1 and "deadline of 0.2 s" in str(caught[0])


def test_normal_queries_are_unaffected_by_limits(ds):
    plain = ds.filter_sql("max_score >= ?", (1100,))
    assert len(plain) and np.array_equal(ds.filter_sql("max_score >= ?", (1100,), timeout=60), plain)
    assert np.array_equal(ds.run_ids("id > ?", (1,), timeout=60), ds.run_ids("id > ?", (1,)))
    for a, b in zip(ds.split(0.5, seed=3, timeout=60), ds.split(0.5, seed=3)):
        assert np.array_equal(a, b)
    # The filter's own errors are still SQLite's.
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="no_such_column"):
        ds.filter_sql("no_such_column = 1", timeout=60)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_bad_timeouts_are_refused(ds, bad):
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        ds.filter_sql("", timeout=bad)


CHILD = textwrap.dedent("""
    import sys
    import a2pack
    ds = a2pack.Dataset(sys.argv[1])
    print("ready", flush=True)
    try:
        getattr(ds, sys.argv[2])({ENDLESS!r})
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    # The handle is sound after the interrupt.
    print("rows", len(ds.filter_sql("")), flush=True)
    # A second interrupt, now uncaught: the usual exit of a Ctrl-C.
    ds.filter_sql({ENDLESS!r})
""").format(ENDLESS=ENDLESS)


@pytest.mark.parametrize("method", ["filter_sql", "run_ids"])
def test_ctrl_c_stops_a_running_query(ds_path, ds, method):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(ds_path), method],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ))
    # Generous: a query that ignores the signal never ends at all, and the
    # reads below would wait for it.
    watchdog = threading.Timer(60, child.kill)
    watchdog.start()
    try:
        assert child.stdout.readline() == "ready\n"
        # The query starts right after "ready"; a signal that came before it
        # would be raised as well, only sooner.
        threading.Event().wait(0.3)
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline() == "interrupted\n"
        assert child.stdout.readline() == f"rows {len(ds)}\n"
        threading.Event().wait(0.3)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate()
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGINT, err
    assert "KeyboardInterrupt" in err
