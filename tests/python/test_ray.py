"""a2pack.ray on a real local Ray cluster (started here, 2 CPUs, and shut
down after): every source's rows against the library's own readers, every
sink byte for byte against the CLI with one block and with several, a Ray
Train run with 2 workers that resumes from its checkpoint on 1, the
self-play example, and bad input (a missing path, a damaged file, a pattern
matching nothing) failing with an error that names the file.

Every Ray call runs under a deadline (SIGALRM): a fault fails the test
instead of hanging it."""

import contextlib
import filecmp
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pa = pytest.importorskip("pyarrow")

import a2pack  # noqa: E402
import a2pack.ray as a2ray  # noqa: E402
from beam_ddp_helpers import make_run, write_run_folder  # noqa: E402
from cli_util import cli_of_loaded_library  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
EPOCH = "1700000000"


def load_factor() -> float:
    """How many times over the machine's CPUs are asked for now (at least
    1): Ray's workers on a machine already busy take that much longer."""
    cpus = os.cpu_count() or 1
    return max(1.0, os.getloadavg()[0] / cpus)


@contextlib.contextmanager
def deadline(seconds: int, what: str = "a Ray call"):
    """Fail with TimeoutError (in the main thread, interrupting ray.get)
    when the block runs past `seconds` on an idle machine, stretched by
    the load when the block starts. The bound is there so that a fault
    fails the test instead of hanging it, not to time Ray: on a machine
    whose CPUs are asked for several times over, Ray's workers are slowed
    as much."""
    seconds = int(seconds * load_factor())

    def expired(_sig, _frame):
        raise TimeoutError(f"{what} ran past {seconds} s (load average "
                           f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local Ray cluster for the module: 2 CPUs, no dashboard, on the
    loopback address; shut down after the last test."""
    # Ray's session files (logs, sockets) in a folder of the module's own,
    # short enough for the sockets' paths, removed after.
    temp = tempfile.mkdtemp(prefix="a2ray-")
    with deadline(360, "ray.init"):
        # Ray gives its raylet a fixed 30 s to register ("The current node
        # timed out during startup"), which a loaded machine can miss: the
        # start is tried again from scratch, a few times.
        for attempt in range(3):
            try:
                # Ray starts its workers at niceness 15 (worker_niceness): on a
                # machine that other work keeps busy they then get a few per
                # cent of a CPU (TorchTrainer.fit: 47 s idle, 804 s at load
                # 5), so here they run at the test's own priority.
                ray.init(num_cpus=2, include_dashboard=False, object_store_memory=256 << 20,
                         _node_ip_address="127.0.0.1", log_to_driver=False, _temp_dir=temp,
                         _system_config={"worker_niceness": 0})
                break
            except Exception as e:
                if "timed out during startup" not in str(e) or attempt == 2:
                    raise
                ray.shutdown()
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    # The sources' rows are compared in the order of the library's readers:
    # Ray hands blocks out in the order they finish unless told otherwise.
    ctx.execution_options.preserve_order = True
    try:
        yield
    finally:
        try:
            with deadline(120, "ray.shutdown"):
                ray.shutdown()
        finally:
            shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Run files (flat, and nested with a subfolder), the CLI's pack, bag and
    datasets of them, with SOURCE_DATE_EPOCH fixed for the manifests."""
    root = tmp_path_factory.mktemp("ray-data")
    cli = str(cli_of_loaded_library())
    env = dict(os.environ, SOURCE_DATE_EPOCH=EPOCH)
    flat, nested = root / "runs", root / "nested"
    write_run_folder(flat, 12, nested=False)
    write_run_folder(nested, 9, first_seed=50, nested=True)

    def run(*args):
        subprocess.run([cli, *map(str, args)], check=True, capture_output=True, env=env,
                       timeout=120)
    run("pack", "-q", "-i", flat, "-o", root / "cli.a2pack")
    run("pack", "-q", "-i", nested, "-o", root / "nested.a2pack")
    run("bag", "convert", flat, root / "cli@3.bagz")
    run("bag", "convert", flat, root / "cli.bag")
    run("dataset", "build", "--no-progress", "-i", flat, "--out", root / "cli_ds")
    run("dataset", "build", "--no-progress", "-i", nested, "--out", root / "nested_ds")
    run("dataset", "build", "--no-progress", "-i", flat, "--out", root / "sharded_ds",
        "--shard-rows", "150")
    return {"root": root, "cli": cli, "env": env, "flat": flat, "nested": nested, "run": run}


def same_files(a, b, names):
    for n in names:
        assert filecmp.cmp(a / n, b / n, shallow=False), f"{n} differs: {a} vs {b}"


def leftovers(folder):
    """Names a failed or finished write must not leave: staging folders and
    temporary files."""
    return sorted(n for n in os.listdir(folder) if ".a2pack-ray-" in n or ".tmp" in n
                  or "ray-append" in n)


# ------------------------------------------------------------------ sources
@pytest.mark.parametrize("blocks", [1, 3])
def test_read_runs_and_pack_rows_match_the_library(data, blocks):
    """read_runs (a folder; a list) and read_pack give one row per run, in the
    library's order, with the run file's bytes, its meta and its steps
    equal to RunV2's; the read tasks are the blocks asked for."""
    nested = data["nested"]
    files = sorted((p for p in nested.rglob("*.a2run2")),
                   key=lambda p: os.fsencode(str(p.relative_to(nested))))
    with deadline(120):
        ds = a2ray.read_runs(nested, override_num_blocks=blocks).materialize()
        assert ds.num_blocks() == blocks
        rows = ds.take_all()
        listed = a2ray.read_runs([str(f) for f in files[::-1]], columns=["key", "moves"],
                                 override_num_blocks=blocks).take_all()
        packed = a2ray.read_pack(data["root"] / "nested.a2pack",
                                 override_num_blocks=blocks).take_all()
    assert [r["key"] for r in rows] == [str(f.relative_to(nested)) for f in files]
    assert [r["index"] for r in rows] == list(range(len(files)))
    reader = a2pack.PackReader(data["root"] / "nested.a2pack")
    assert [r["key"] for r in packed] == list(range(len(reader)))
    for row, f, prow in zip(rows, files, packed):
        run = a2pack.RunV2.load(f)
        assert row["run"] == f.read_bytes() and row["source"] == str(f)
        for r in (row, prow):
            assert r["num_steps"] == run.meta.steps == len(r["boards"])
            assert r["max_score"] == run.meta.max_score
            assert r["engine"] == run.meta.engine_str
            assert np.array_equal(r["boards"], run.boards)
            assert np.array_equal(r["moves"], run.moves)
            assert np.array_equal(r["legal_masks"], run.legal_masks)
            assert np.array_equal(np.stack(r["branch_values"]).astype(np.float32),
                                  run.branch_values, equal_nan=True)
            assert np.array_equal(np.stack(r["exponents"])[:, 0], run.boards >> 60)
    for prow, i in zip(packed, range(len(reader))):
        assert prow["run"] == reader.read(i)
    assert [r["key"] for r in listed] == [str(f) for f in files[::-1]]  # a list keeps its order
    assert set(listed[0]) == {"key", "moves"}
    # The read tasks' metadata, before anything is read: rows, sizes, files.
    for src, n in ((a2ray.RunsDatasource(nested), len(files)),
                   (a2ray.PackDatasource(data["root"] / "nested.a2pack"), len(reader))):
        tasks = src.get_read_tasks(blocks)
        assert len(tasks) == blocks
        assert sum(t.metadata.num_rows for t in tasks) == n
        assert all(t.metadata.size_bytes > 0 and t.metadata.input_files for t in tasks)
        assert tasks[0].schema.names == list(a2ray.RUN_COLUMNS)


def test_read_bag_shards_and_patterns_match_the_library(data):
    """A sharded spec, a glob and a single file: the records and their
    global indices, as bag.Reader reads them."""
    root = data["root"]
    want = list(a2pack.bag.Reader(str(root / "cli@3.bagz")))
    with deadline(120):
        sharded = a2ray.read_bag(str(root / "cli@3.bagz"), override_num_blocks=4).take_all()
        globbed = a2ray.read_bag(str(root / "cli-*-of-00003.bagz"),
                                 override_num_blocks=2).take_all()
        single = a2ray.read_bag(str(root / "cli.bag"), columns=["record"]).take_all()
    for rows in (sharded, globbed):
        assert [r["record"] for r in rows] == want
        assert [r["index"] for r in rows] == list(range(len(want)))
    assert [r["record"] for r in single] == list(a2pack.bag.Reader(str(root / "cli.bag")))
    tasks = a2ray.BagDatasource(str(root / "cli@3.bagz")).get_read_tasks(3)
    assert [t.metadata.num_rows for t in tasks] == [4, 4, 4]
    assert all(t.metadata.size_bytes > 0 for t in tasks)


@pytest.mark.parametrize("name", ["cli_ds", "sharded_ds"])
def test_read_dataset_whole_runs_and_columns(data, name):
    """A single-file and a sharded dataset: every row and column equal to
    the library's (Dataset.steps and its Arrow export), blocks and read
    tasks cut where runs start, projection by argument and by Ray's
    select_columns."""
    path = data["root"] / name
    lib = a2pack.Dataset(path)
    want = pa.Table.from_batches([pa.record_batch(lib.arrow_gather(np.arange(len(lib))))])
    with deadline(120):
        ds = a2ray.read_dataset(path, override_num_blocks=3).materialize()
        blocks = [ray.get(ref) for ref in ds.to_arrow_refs()]
        picked = a2ray.read_dataset(path, ["move", "run_id"]).take_all()
        selected = a2ray.read_dataset(path).select_columns(["ev_values"]).take_all()
    got = pa.concat_tables(blocks)
    assert got.num_rows == len(lib) and got.schema.names == list(a2ray.STEP_COLUMNS)
    for c in a2ray.STEP_COLUMNS:
        assert got.column(c).equals(want.column(c)), c
    assert len(blocks) >= 3
    for b in blocks:  # whole runs: each block starts at a run's step 0 and ends at its last
        steps = b.column("step_index").to_numpy()
        runs = b.column("run_id").to_numpy()
        assert steps[0] == 0
        ends = np.flatnonzero(np.diff(runs)) + 1
        assert (steps[ends] == 0).all()
        last = int(runs[-1])
        assert int((lib.steps["run_id"] == last).sum()) == int((runs == last).sum())
    assert [r["move"] for r in picked] == lib.steps["move"].tolist()
    assert set(picked[0]) == {"move", "run_id"}
    assert set(selected[0]) == {"ev_values"}
    assert np.array_equal(np.stack([r["ev_values"] for r in selected]), lib.steps["ev_values"])
    tasks = a2ray.StepDatasetDatasource(path).get_read_tasks(2)
    assert sum(t.metadata.num_rows for t in tasks) == len(lib)
    assert all(t.metadata.size_bytes == t.metadata.num_rows * 48 for t in tasks)


def test_read_log_matches_the_library(tmp_path):
    """A logger folder of many segments read in several tasks (and two
    folders by a glob): the records of a2pack.logger.decode, in order."""
    rng = np.random.default_rng(4)
    for name in ("log-a", "log-b"):
        with a2pack.DataLogger(tmp_path / name, rotate_bytes=8192, frame_bytes=4096) as log:
            sids = [log.register_stream({"entity": f"e{k}"}, epoch_scale=1e-3, value_scale=1e-6)
                    for k in range(3)]
            for i in range(2500):
                n = int(rng.integers(1, 6))
                idx = np.sort(rng.choice(1000, n, replace=False)).astype(np.uint32)
                log.record(sids[i % 3], i * 0.25, idx, rng.normal(size=n))
                if i % 250 == 0:
                    log.flush()
    assert len(os.listdir(tmp_path / "log-a" / "segments")) > 4
    want = a2pack.logger.decode(tmp_path / "log-a").to_arrow()
    with deadline(120):
        one = a2ray.read_log(tmp_path / "log-a", override_num_blocks=3).materialize()
        rows = pa.concat_tables([ray.get(r) for r in one.to_arrow_refs()])
        both = a2ray.read_log(str(tmp_path / "log-*"), columns=["stream_id", "source"],
                              override_num_blocks=4).take_all()
    assert one.num_blocks() == 3
    tasks = a2ray.LogDatasource(tmp_path / "log-a").get_read_tasks(3)
    assert all(t.metadata.num_rows is None and t.metadata.size_bytes > 0 for t in tasks)
    for c in ("stream_id", "epoch", "indices", "values"):
        assert rows.column(c).combine_chunks().equals(want.column(c).combine_chunks()), c
    assert len(both) == 2 * want.num_rows
    assert [r["source"] for r in both] == ([str(tmp_path / "log-a")] * want.num_rows
                                           + [str(tmp_path / "log-b")] * want.num_rows)


# ------------------------------------------------------------------ sinks
@pytest.mark.parametrize("blocks", [1, 4])
def test_sinks_write_the_cli_bytes(data, tmp_path, monkeypatch, blocks):
    """write_pack, write_bag (3 shards and one file) and write_dataset (one
    file and sharded) from the runs of a folder, shuffled across blocks:
    the bytes of `a2pack pack`, `bag convert` and `dataset build` of that
    folder; no staging folder is left."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    root, flat = data["root"], data["flat"]
    with deadline(180):
        runs = a2ray.read_runs(flat, override_num_blocks=blocks).random_shuffle(seed=blocks)
        runs = runs.repartition(blocks).materialize()
        assert runs.num_blocks() == blocks
        info = a2ray.write_pack(runs, tmp_path / "ray.a2pack")
        a2ray.write_bag(runs, str(tmp_path / "ray@3.bagz"))
        a2ray.write_bag(runs, str(tmp_path / "ray.bag"))
        built = a2ray.write_dataset(runs, tmp_path / "ds", source_input=str(flat),
                                    source_kind="dir")
        a2ray.write_dataset(runs, tmp_path / "sharded", source_input=str(flat),
                            source_kind="dir", shard_rows=150)
        # A nested folder: the pack's order (path components) and the dataset's (bytes).
        nested = a2ray.read_runs(data["nested"], override_num_blocks=blocks)
        a2ray.write_pack(nested, tmp_path / "nested.a2pack")
    assert info["runs"] == 12 and built["runs"] == 12
    assert filecmp.cmp(tmp_path / "ray.a2pack", root / "cli.a2pack", shallow=False)
    assert filecmp.cmp(tmp_path / "nested.a2pack", root / "nested.a2pack", shallow=False)
    for k in range(3):
        n = f"-{k:05d}-of-00003.bagz"
        assert filecmp.cmp(tmp_path / f"ray{n}", root / f"cli{n}", shallow=False), n
    assert filecmp.cmp(tmp_path / "ray.bag", root / "cli.bag", shallow=False)
    try:
        import bagz  # the reference reader reads the shards too
    except ImportError:
        bagz = None
    if bagz is not None:
        assert sorted(bagz.Reader(str(tmp_path / "ray@3.bagz")).read()) == \
            sorted(p.read_bytes() for p in flat.glob("*.a2run2"))
    same_files(tmp_path / "ds", root / "cli_ds", ["steps.npy", "metadata.db", "manifest.json"])
    shards = sorted(os.listdir(root / "sharded_ds"))
    assert sorted(os.listdir(tmp_path / "sharded")) == shards
    same_files(tmp_path / "sharded", root / "sharded_ds", shards)
    assert leftovers(tmp_path) == []


def test_bag_round_trip_and_records_in_order(data, tmp_path):
    """read_bag | write_bag(order_by="index") copies a bag record for record
    (byte for byte for one file; a sharded one into one file in its global
    order); rows made in Python (runs_table) write like read runs."""
    root = data["root"]
    with deadline(120):
        a2ray.write_bag(a2ray.read_bag(str(root / "cli.bag"), override_num_blocks=3),
                        str(tmp_path / "copy.bag"), order_by="index")
        a2ray.write_bag(a2ray.read_bag(str(root / "cli@3.bagz"), override_num_blocks=3),
                        str(tmp_path / "joined.bagz"), order_by="index")
        runs = [a2pack.RunV2.load(p) for p in sorted(data["flat"].glob("*.a2run2"))]
        made = ray.data.from_arrow(a2ray.runs_table(runs[::-1], keys=list(range(12))[::-1]))
        a2ray.write_pack(made, tmp_path / "made.a2pack")
    assert filecmp.cmp(tmp_path / "copy.bag", root / "cli.bag", shallow=False)
    assert list(a2pack.bag.Reader(str(tmp_path / "joined.bagz"))) == \
        list(a2pack.bag.Reader(str(root / "cli@3.bagz")))
    assert [r.to_bytes() for r in a2pack.PackReader(tmp_path / "made.a2pack")] == \
        [r.to_bytes() for r in runs]


@pytest.mark.parametrize("blocks", [1, 3])
def test_append_dataset_matches_the_cli_append(data, tmp_path, monkeypatch, blocks):
    """append_dataset to a single-file and to a sharded dataset: the rows
    and metadata.db of `a2pack dataset append` of the same runs."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    root, flat = data["root"], data["flat"]
    more = tmp_path / "more"
    write_run_folder(more, 7, first_seed=100, nested=False)
    for base, extra in (("cli_ds", []), ("sharded_ds", ["--shard-rows", "150"])):
        shutil.copytree(root / base, tmp_path / f"cli-{base}")
        shutil.copytree(root / base, tmp_path / f"ray-{base}")
        data["run"]("dataset", "append", "--no-progress", "-d", tmp_path / f"cli-{base}",
                    "-i", more, *extra)
        with deadline(120):
            got = a2ray.append_dataset(a2ray.read_runs(more, override_num_blocks=blocks),
                                       tmp_path / f"ray-{base}")
        assert got["runs_added"] == 7 and got["total_runs"] == 19
        names = sorted(n for n in os.listdir(tmp_path / f"cli-{base}") if n != "manifest.json")
        assert sorted(n for n in os.listdir(tmp_path / f"ray-{base}")
                      if n != "manifest.json") == names
        same_files(tmp_path / f"ray-{base}", tmp_path / f"cli-{base}", names)
        a2pack.verify_dataset(tmp_path / f"ray-{base}")
        source = json.loads((tmp_path / f"ray-{base}" / "manifest.json").read_text())["sources"]
        assert (source[-1]["input"], source[-1]["kind"], source[-1]["runs"]) == ("ray", "ray", 7)
    assert leftovers(tmp_path) == []


def test_failed_writes_leave_no_file_that_reads_as_complete(data, tmp_path):
    """A run that is not a run, in the middle of the input: write_pack and
    write_bag fail naming its key, write_dataset names it too (or skips it
    with skip_bad), append_dataset leaves the dataset as it was; no output
    file, temporary file or staging folder is left."""
    runs = [a2pack.RunV2.load(p).to_bytes() for p in sorted(data["flat"].glob("*.a2run2"))]
    rows = [{"key": f"r{i:02d}", "run": r} for i, r in enumerate(runs)]
    rows[5]["run"] = b"A2T2 not a run at all"
    bad = ray.data.from_items(rows, override_num_blocks=3)
    out = tmp_path / "out"
    out.mkdir()
    shutil.copytree(data["root"] / "cli_ds", out / "ds")
    before = {n: (out / "ds" / n).read_bytes() for n in os.listdir(out / "ds")}
    with deadline(180):
        with pytest.raises(Exception, match="r05"):
            a2ray.write_pack(bad, out / "x.a2pack")
        with pytest.raises(Exception, match="r05"):
            a2ray.write_dataset(bad, out / "newds")
        skipped = a2ray.write_dataset(bad, out / "skipped", skip_bad=True)
        with pytest.raises(Exception, match="run-000000005|r05"):
            a2ray.append_dataset(bad, out / "ds")
        with pytest.raises(Exception, match="no 'run' column"):
            a2ray.write_pack(ray.data.from_items([{"key": 1, "x": 2}]), out / "y.a2pack")
        with pytest.raises(Exception, match="two runs have the key 'r00'"):
            a2ray.write_pack(ray.data.from_items(rows[:2] + rows[:1]), out / "z.a2pack")
    assert skipped["runs"] == 11 and [k for k, _ in skipped["bad_runs"]] == ["r05"]
    assert sorted(os.listdir(out)) == ["ds", "skipped"]
    assert {n: (out / "ds" / n).read_bytes() for n in os.listdir(out / "ds")} == before
    assert leftovers(out) == []


def test_bad_input_is_a_clear_error_naming_the_file(data, tmp_path):
    """A missing path, a pattern matching nothing, a damaged run file, a
    damaged packfile entry and a truncated record file: each an error that
    names the file (raised when the read is set up where it can be, else
    by the read task), never a hang."""
    with deadline(120):
        for call, what in ((lambda: a2ray.read_runs(tmp_path / "nowhere"), "nowhere"),
                           (lambda: a2ray.read_runs([str(tmp_path / "gone.a2run2")]),
                            "gone.a2run2"),
                           (lambda: a2ray.read_pack(tmp_path / "gone.a2pack"), "gone.a2pack"),
                           (lambda: a2ray.read_pack(str(tmp_path / "*.a2pack")), r"\*\.a2pack"),
                           (lambda: a2ray.read_bag(str(tmp_path / "gone@2.bagz")), "gone"),
                           (lambda: a2ray.read_bag(str(tmp_path / "x-*.bagz")), r"x-\*\.bagz"),
                           (lambda: a2ray.read_dataset(tmp_path / "nods"), "nods"),
                           (lambda: a2ray.read_log(tmp_path / "nolog"), "nolog"),
                           (lambda: a2ray.read_log(str(tmp_path / "logs-*")), r"logs-\*")):
            with pytest.raises((FileNotFoundError, a2pack.Error), match=what):
                call()
        runs = tmp_path / "runs"
        write_run_folder(runs, 5, nested=False)
        broken = runs / "zz-broken.a2run2"
        broken.write_bytes(b"A2T2 this is not a run")
        with pytest.raises(Exception, match="zz-broken.a2run2"):
            a2ray.read_runs(runs, override_num_blocks=2).take_all()
        pack = tmp_path / "p.a2pack"
        with a2pack.PackWriter(pack) as w:
            for s in range(6):
                w.add(make_run(s, 5))
        e = a2pack.PackReader(pack).entry(4)
        raw = bytearray(pack.read_bytes())
        raw[e.offset + e.length // 2] ^= 0xFF
        pack.write_bytes(bytes(raw))
        with pytest.raises(Exception, match=r"p\.a2pack.*(entry 4|CRC|checksum)"):
            a2ray.read_pack(pack, override_num_blocks=2).take_all()
        bag = tmp_path / "t.bagz"
        with a2pack.bag.Writer(str(bag)) as w:
            for i in range(50):
                w.write(b"record %d" % i)
        bag.write_bytes(bag.read_bytes()[:-5])
        with pytest.raises(a2pack.Error, match="t.bagz"):
            a2ray.read_bag(str(bag))
        with pytest.raises(ValueError, match="no column 'nope'"):
            a2ray.read_dataset(data["root"] / "cli_ds", ["nope"])


def test_clear_error_without_ray():
    code = ("import sys; sys.modules['ray'] = None\n"
            "import a2pack\n"
            "try:\n    import a2pack.ray\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=120)
    assert "pip install 'a2pack[ray]'" in out.stdout


# ------------------------------------------------------------------ Ray Train
def _train_loop(config):
    """Each worker: a feed with its rank (train_feed), a linear policy, a
    checkpoint every second step (report_feed, the model saved beside the
    feed state); the row indices of each batch are saved to compare."""
    import torch
    import ray.train.torch
    import a2pack.ray as a2ray

    rank = ray.train.get_context().get_world_rank()
    feed = a2ray.train_feed(config["ds"], batch_size=32, seed=3, epochs=1, drop_last=True,
                            moves_dtype="int64", threads=1, depth=2)
    model = torch.nn.Linear(16, 4)
    ckpt = ray.train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            model.load_state_dict(torch.load(os.path.join(d, "model.pt")))
    model = ray.train.torch.prepare_model(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, b in enumerate(feed):
        if config["stop"] is not None and step >= config["stop"]:
            break
        np.save(os.path.join(config["out"], f"{config['tag']}-{step:03d}-{rank}.npy"),
                np.asarray(b["indices"]))
        loss = torch.nn.functional.cross_entropy(model(torch.from_dlpack(b["exponents"]).float()),
                                                 torch.from_dlpack(b["moves"]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 2 == 1:
            plain = getattr(model, "module", model)
            a2ray.report_feed(feed, {"loss": float(loss.detach()), "step": step},
                              save=lambda d: torch.save(plain.state_dict(),
                                                        os.path.join(d, "model.pt")))
    feed.close()


def test_train_resumes_from_its_checkpoint_on_another_worker_count(data, tmp_path):
    """A TorchTrainer with 2 workers stops after 5 steps, its last
    checkpoint after step 4 (batches 0..3); the same run again with 1
    worker resumes there: together the batches are those of one
    uninterrupted feed, batch 4 on, with no row twice or left out, and the
    ranks' parts of each global batch are disjoint."""
    torch = pytest.importorskip("torch")  # noqa: F841
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    ds_path = str(data["root"] / "cli_ds")
    out = tmp_path / "batches"
    out.mkdir()
    run_config = RunConfig(name="feed", storage_path=str(tmp_path / "storage"))
    with deadline(240, "TorchTrainer.fit"):
        for tag, workers, stop in (("a", 2, 5), ("b", 1, None)):
            result = TorchTrainer(
                _train_loop, train_loop_config={"ds": ds_path, "out": str(out), "tag": tag,
                                                "stop": stop},
                scaling_config=ScalingConfig(num_workers=workers, use_gpu=False),
                run_config=run_config).fit()
            assert result.error is None
    state = a2ray.feed_state(result.checkpoint)
    assert state is not None
    # One rank's uninterrupted feed over the same rows: the global batches.
    ref = a2pack.Feed(a2pack.Dataset(ds_path), batch_size=32, seed=3, epochs=1, drop_last=True,
                      moves_dtype="int64")
    every = [np.asarray(b["indices"]).copy() for b in ref]
    ref.close()
    first = [np.concatenate([np.load(out / f"a-{s:03d}-{r}.npy") for r in (0, 1)])
             for s in range(5)]
    for s in range(5):
        parts = [np.load(out / f"a-{s:03d}-{r}.npy") for r in (0, 1)]
        assert not set(parts[0].tolist()) & set(parts[1].tolist())
        assert np.array_equal(first[s], every[s])
    resumed = sorted(out.glob("b-*.npy"))
    assert len(resumed) == len(every) - 4
    for k, f in enumerate(resumed):
        assert np.array_equal(np.load(f), every[4 + k]), f.name


# ------------------------------------------------------------------ self-play
def test_selfplay_example_appends_games_a_learner_reads(tmp_path):
    """examples/selfplay_ray.py on this cluster: actors play, their games are
    appended round by round, the learner's dataset grows by them."""
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import selfplay_ray
    finally:
        sys.path.pop(0)
    with deadline(240, "the self-play example"):
        report = selfplay_ray.main(["--out", str(tmp_path / "sp"), "--actors", "2",
                                    "--games", "2", "--rounds", "2", "--steps", "3",
                                    "--max-moves", "60"])
    assert report["runs"] == 2 * 2 * 2
    ds = a2pack.Dataset(tmp_path / "sp" / "dataset")
    assert ds.num_runs == 8 and len(ds) == report["rows"]
    assert report["learner_rows"] == report["rows"]  # its live feed followed every append
    assert len(report["losses"]) == 2 and all(np.isfinite(report["losses"]))
    a2pack.verify_dataset(tmp_path / "sp" / "dataset")


# ------------------------------------------------------------------ object storage
def write_log(folder):
    """A logger folder of several segments (one stream, 3000 records)."""
    with a2pack.DataLogger(folder, rotate_bytes=8192, frame_bytes=4096) as w:
        sid = w.register_stream({"entity": "e"}, epoch_scale=1e-3, value_scale=1e-6)
        for i in range(3000):
            w.record(sid, i * 0.5, np.array([i % 7, 9 + i % 5], np.uint32), [i, -i])
            if i % 300 == 0:
                w.flush()
    return folder


def test_sources_and_a_sink_over_s3(data, tmp_path, monkeypatch):
    """A bag, a pack, run files and a dataset in moto's S3 server: the same
    rows as local reads; write_bag to a bucket: the CLI's shards. The workers get
    the endpoint and credentials through the tasks' runtime_env."""
    pytest.importorskip("moto")
    import storage_servers as ss
    s3 = ss.start_moto()
    try:
        env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3.url,
               "A2PACK_CACHE_DIR": str(tmp_path / "cache")}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        import boto3
        client = boto3.client("s3", endpoint_url=s3.url, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_bucket(Bucket="a2pack-ray")
        root, flat = data["root"], data["flat"]
        for f in sorted(flat.glob("*.a2run2")):
            client.upload_file(str(f), "a2pack-ray", f"runs/{f.name}")
        client.upload_file(str(root / "cli.a2pack"), "a2pack-ray", "cli.a2pack")
        for k in range(3):
            n = f"cli-{k:05d}-of-00003.bagz"
            client.upload_file(str(root / n), "a2pack-ray", n)
        for n in ("steps.npy", "metadata.db", "manifest.json"):
            client.upload_file(str(root / "cli_ds" / n), "a2pack-ray", f"ds/{n}")
        log = write_log(tmp_path / "log")
        for f in sorted(p for p in log.rglob("*") if p.is_file()):
            client.upload_file(str(f), "a2pack-ray", f"logs/run1/{f.relative_to(log)}")
        assert len(os.listdir(log / "segments")) > 2
        remote = {"env_vars": env}
        with deadline(180):
            bag = a2ray.read_bag("s3://a2pack-ray/cli@3.bagz", override_num_blocks=2,
                                 runtime_env=remote).take_all()
            pack = a2ray.read_pack("s3://a2pack-ray/cli.a2pack", columns=["key", "run"],
                                   override_num_blocks=2, runtime_env=remote).take_all()
            runs = a2ray.read_runs("s3://a2pack-ray/runs/", override_num_blocks=2,
                                   runtime_env=remote).materialize()
            steps = a2ray.read_dataset("s3://a2pack-ray/ds", ["move", "run_id"],
                                       override_num_blocks=2, runtime_env=remote).take_all()
            a2ray.write_bag(runs, "s3://a2pack-ray/out@3.bagz",
                            ray_remote_args={"runtime_env": remote})
            logs = pa.concat_tables(ray.get(a2ray.read_log(
                "s3://a2pack-ray/logs/run1", override_num_blocks=2,
                runtime_env=remote).to_arrow_refs()))
            globbed = a2ray.read_log("s3://a2pack-ray/logs/run*", columns=["epoch", "source"],
                                     runtime_env=remote).take_all()
        want = a2pack.logger.decode(log).to_arrow()
        for c in ("stream_id", "epoch", "indices", "values"):
            assert logs.column(c).combine_chunks().equals(want.column(c).combine_chunks()), c
        assert [r["source"] for r in globbed] == ["s3://a2pack-ray/logs/run1"] * want.num_rows
        with pytest.raises(FileNotFoundError, match="s3://a2pack-ray/logs/none"):
            a2ray.read_log("s3://a2pack-ray/logs/none")
        assert [r["record"] for r in bag] == list(a2pack.bag.Reader(str(root / "cli@3.bagz")))
        local = a2pack.PackReader(root / "cli.a2pack")
        assert [r["run"] for r in pack] == [local.read(i) for i in range(len(local))]
        assert [r["key"] for r in runs.take_all()] == sorted(f.name for f in flat.glob("*.a2run2"))
        lib = a2pack.Dataset(root / "cli_ds")
        assert [r["move"] for r in steps] == lib.steps["move"].tolist()
        assert [r["run_id"] for r in steps] == lib.steps["run_id"].tolist()
        for k in range(3):
            n = f"-{k:05d}-of-00003.bagz"
            got = client.get_object(Bucket="a2pack-ray", Key=f"out{n}")["Body"].read()
            assert got == (root / f"cli{n}").read_bytes(), n
    finally:
        s3.stop()



def test_read_log_over_gcs(tmp_path, monkeypatch):
    """A logger folder in a GCS emulator's bucket: the records of the local
    folder, read in two tasks that each copy only their segments."""
    pytest.importorskip("gcp_storage_emulator")
    import storage_servers as ss
    gcs = ss.start_gcs()
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.url)
        ss.gcs_create_bucket(gcs.url, "logs")
        log = write_log(tmp_path / "log")
        fs, _ = a2ray._filesystem("gs://logs/x")
        for f in sorted(p for p in log.rglob("*") if p.is_file()):
            with fs.open_output_stream(f"logs/run1/{f.relative_to(log)}", compression=None) as o:
                o.write(f.read_bytes())
        remote = {"env_vars": {"STORAGE_EMULATOR_HOST": gcs.url}}
        with deadline(120):
            got = pa.concat_tables(ray.get(a2ray.read_log(
                "gs://logs/run1", override_num_blocks=2, runtime_env=remote).to_arrow_refs()))
        want = a2pack.logger.decode(log).to_arrow()
        for c in ("stream_id", "epoch", "indices", "values"):
            assert got.column(c).combine_chunks().equals(want.column(c).combine_chunks()), c
    finally:
        gcs.stop()
