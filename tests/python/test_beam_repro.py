"""Reproducible Beam builds: BuildDataset and WriteToPack write the bytes of
`a2pack dataset build` and `a2pack pack` for the same input on every runner
mode, however the runner splits, schedules and shuffles the runs:

- DirectRunner in process (its default mode), multi_threading and
  multi_processing with 2 workers;
- the legacy bundle-based DirectRunner;
- the portable runner (PortableRunner on Beam's embedded job service, the
  SDK worker in this process: environment_type=LOOPBACK).

Each pipeline puts a Reshuffle between the read and the write, so the runs
reach the writers in an order unrelated to the input's. The runs are few
(14) to keep each pipeline quick; the folder has sibling subfolders `b/` and
`b.x/`, which `a2pack dataset build` (byte order of the relative paths) and
`a2pack pack` (component order) put in opposite orders."""

import filecmp
import os
import shutil
import sqlite3
import subprocess
import tempfile

import pytest

beam = pytest.importorskip("apache_beam")
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from apache_beam.transforms.window import TimestampedValue  # noqa: E402
from apache_beam.utils.timestamp import Timestamp  # noqa: E402

import a2pack  # noqa: E402
from a2pack import beam as a2beam  # noqa: E402
from beam_ddp_helpers import make_run, write_run_folder  # noqa: E402
from cli_util import cli_of_loaded_library  # noqa: E402

EPOCH = "1700000000"
N_RUNS = 14

RUNNERS = {
    "direct-in-process": dict(runner="DirectRunner"),
    "direct-multi-threading": dict(runner="DirectRunner", direct_running_mode="multi_threading",
                                   direct_num_workers=2),
    "direct-multi-processing": dict(runner="DirectRunner",
                                    direct_running_mode="multi_processing",
                                    direct_num_workers=2),
    "bundle-based-direct": dict(runner="BundleBasedDirectRunner"),
    "portable-loopback": dict(runner="PortableRunner", job_endpoint="embed",
                              environment_type="LOOPBACK"),
}


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """The input (a run folder and its pack) and what the CLI makes of it,
    with SOURCE_DATE_EPOCH set for the whole module: Beam's worker processes
    start per pipeline and inherit it."""
    root = tmp_path_factory.mktemp("repro")
    saved = {k: os.environ.get(k) for k in ("SOURCE_DATE_EPOCH",)}
    before, tempfile.tempdir = tempfile.tempdir, str(root / "beam-temp")  # job-server leftovers
    os.makedirs(tempfile.tempdir)
    os.environ["SOURCE_DATE_EPOCH"] = EPOCH
    try:
        runs = root / "runs"
        write_run_folder(runs, N_RUNS - 2)
        write_run_folder(runs / "b.x", 2, first_seed=50, nested=False)
        cli = str(cli_of_loaded_library())

        def run(*args):
            subprocess.run([cli, *map(str, args)], check=True, capture_output=True)

        run("pack", "--input", runs, "--output", root / "runs.a2pack")
        run("dataset", "build", "--input", runs, "--out", root / "cli_dir")
        run("dataset", "build", "--input", root / "runs.a2pack", "--out", root / "cli_pack")
        yield root
    finally:
        tempfile.tempdir = before
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def same_dataset(got, want):
    """steps.npy and manifest.json byte for byte; metadata.db by content and,
    since the CLI used is built with the library this process loaded (the
    same SQLite), byte for byte too."""
    assert sorted(os.listdir(got)) == sorted(os.listdir(want)) == [
        "manifest.json", "metadata.db", "steps.npy"]
    for f in ("steps.npy", "manifest.json"):
        assert filecmp.cmp(got / f, want / f, shallow=False), f"{f} differs: {got} vs {want}"
    rows = [sqlite3.connect(d / "metadata.db").execute("SELECT * FROM runs ORDER BY id")
            .fetchall() for d in (got, want)]
    assert rows[0] == rows[1] and len(rows[0]) == N_RUNS
    assert filecmp.cmp(got / "metadata.db", want / "metadata.db", shallow=False)


def reference_shards(pack, out_prefix, shards):
    """The pack's entries cut into `shards` consecutive parts, written locally."""
    r = a2pack.PackReader(pack)
    n = len(r)
    paths = []
    for k in range(shards):
        path = f"{out_prefix}-{k:05d}-of-{shards:05d}.a2pack"
        with a2pack.PackWriter(path) as w:
            for i in range(k * n // shards, (k + 1) * n // shards):
                w.add(r.read(i))
        paths.append(path)
    return paths


@pytest.mark.parametrize("mode", list(RUNNERS))
def test_builds_are_the_clis_bytes_on_every_runner(ref, tmp_path, mode):
    out = tmp_path
    p = beam.Pipeline(options=PipelineOptions(**RUNNERS[mode]))
    # Bare runs from a pack: ordered by the entry index the read stamps.
    _ = (p | "pack" >> a2beam.ReadFromPack(str(ref / "runs.a2pack"), records_per_split=2)
         | "shuffle1" >> beam.Reshuffle()
         | "ds-pack" >> a2beam.BuildDataset(out / "ds_pack", source_input=str(ref / "runs.a2pack"),
                                            source_kind="pack"))
    files = p | "files" >> a2beam.ReadRunFiles(ref / "runs")
    # Bare runs from a folder (keys dropped): ordered by the file index.
    _ = (files | "values" >> beam.Values() | "shuffle2" >> beam.Reshuffle()
         | "ds-dir" >> a2beam.BuildDataset(out / "ds_dir", source_input=str(ref / "runs"),
                                           source_kind="dir"))
    # Keyed runs from a folder: `a2pack pack`'s order of the paths.
    _ = (files | "shuffle3" >> beam.Reshuffle()
         | "pack-dir" >> a2beam.WriteToPack(out / "dir.a2pack"))
    # A pack's raw entries, bare, into three shards.
    _ = (p | "raw" >> a2beam.ReadFromPack(str(ref / "runs.a2pack"), decoded=False,
                                          records_per_split=3)
         | "shuffle4" >> beam.Reshuffle()
         | "pack-shards" >> a2beam.WriteToPack(out / "copy@3.a2pack"))
    p.run().wait_until_finish()

    same_dataset(out / "ds_pack", ref / "cli_pack")
    same_dataset(out / "ds_dir", ref / "cli_dir")
    assert filecmp.cmp(out / "dir.a2pack", ref / "runs.a2pack", shallow=False)
    for got, want in zip(sorted(out.glob("copy-*.a2pack")),
                         reference_shards(ref / "runs.a2pack", str(out / "ref"), 3)):
        assert filecmp.cmp(got, want, shallow=False), got
    assert len(list(out.glob("copy-*.a2pack"))) == 3
    assert not [n for n in os.listdir(out) if "temp" in n]  # staging folders removed


def test_the_folder_orders_of_the_two_commands_differ(ref):
    """What the b/ and b.x/ folders are for: the dataset's first runs come
    from b.x/ ('.' sorts before '/'), the pack's from b/ (component order)."""
    first_ds = sqlite3.connect(ref / "cli_dir" / "metadata.db").execute(
        "SELECT max_score FROM runs WHERE id = 0").fetchone()[0]
    b_x = sorted((ref / "runs" / "b.x").iterdir())[0]
    assert first_ds == a2pack.RunV2.load(b_x).meta.max_score
    b_first = sorted((ref / "runs" / "b").iterdir())[0]
    assert a2pack.PackReader(ref / "runs.a2pack").decode(0).to_bytes() == \
        a2pack.RunV2.load(b_first).to_bytes()


def run_pipeline(build):
    p = beam.Pipeline(options=PipelineOptions(runner="DirectRunner"))
    build(p)
    p.run().wait_until_finish()


def test_order_of_arrival_does_not_matter(ref, tmp_path):
    """Runs created in two different orders: with their source positions as
    timestamps they are written in position order (the CLI's bytes); with
    none, in the order of their bytes' digest, the same for both orders."""
    pack = a2pack.PackReader(ref / "runs.a2pack")
    raw = [pack.read(i) for i in range(len(pack))]
    orders = {"fwd": list(range(len(raw))), "rev": list(range(len(raw)))[::-1]}

    def build(p):
        for name, order in orders.items():
            stamped = (p | f"c-{name}" >> beam.Create([(i, raw[i]) for i in order])
                       | f"t-{name}" >> beam.Map(
                           lambda x: TimestampedValue(x[1], Timestamp(micros=x[0]))))
            _ = stamped | f"ds-{name}" >> a2beam.BuildDataset(
                tmp_path / f"ds-{name}", source_input=str(ref / "runs.a2pack"), source_kind="pack")
            _ = stamped | f"w-{name}" >> a2beam.WriteToPack(tmp_path / f"p-{name}.a2pack")
            bare = p | f"bare-{name}" >> beam.Create([raw[i] for i in order])
            _ = bare | f"wb-{name}" >> a2beam.WriteToPack(tmp_path / f"bare-{name}.a2pack")
            _ = bare | f"db-{name}" >> a2beam.BuildDataset(tmp_path / f"bare-ds-{name}")

    run_pipeline(build)
    for name in orders:
        same_dataset(tmp_path / f"ds-{name}", ref / "cli_pack")
        assert filecmp.cmp(tmp_path / f"p-{name}.a2pack", ref / "runs.a2pack", shallow=False)
    assert filecmp.cmp(tmp_path / "bare-fwd.a2pack", tmp_path / "bare-rev.a2pack", shallow=False)
    for f in ("steps.npy", "metadata.db"):
        assert filecmp.cmp(tmp_path / "bare-ds-fwd" / f, tmp_path / "bare-ds-rev" / f,
                           shallow=False), f


def test_several_inputs_follow_their_tuple_order(ref, tmp_path):
    """The pack split in two packs A and B: (A, B) | transform gives the
    whole pack's bytes, B's entries after A's though both start at index 0;
    flattened into one PCollection, A's and B's keyed entries collide and
    BuildDataset says so instead of picking an order."""
    pack = a2pack.PackReader(ref / "runs.a2pack")
    half = len(pack) // 2
    for name, rng in (("a", range(half)), ("b", range(half, len(pack)))):
        with a2pack.PackWriter(tmp_path / f"{name}.a2pack") as w:
            for i in rng:
                w.add(pack.read(i))

    def build(p):
        a = p | "a" >> a2beam.ReadFromPack(str(tmp_path / "a.a2pack"), records_per_split=2)
        b = p | "b" >> a2beam.ReadFromPack(str(tmp_path / "b.a2pack"), records_per_split=2)
        _ = (a, b) | "ds" >> a2beam.BuildDataset(tmp_path / "ds", source_input=str(
            ref / "runs.a2pack"), source_kind="pack")
        _ = (a, b) | "w" >> a2beam.WriteToPack(tmp_path / "ab.a2pack")
        _ = (b, a) | "w2" >> a2beam.WriteToPack(tmp_path / "ba.a2pack")

    run_pipeline(build)
    same_dataset(tmp_path / "ds", ref / "cli_pack")
    assert filecmp.cmp(tmp_path / "ab.a2pack", ref / "runs.a2pack", shallow=False)
    ba = a2pack.PackReader(tmp_path / "ba.a2pack")
    assert [ba.read(i) for i in range(len(ba))] == (
        [pack.read(i) for i in range(half, len(pack))] + [pack.read(i) for i in range(half)])

    with pytest.raises(Exception, match=r"two runs have the key 0\b.*tuple"):
        def flattened(p):
            runs = [p | f"r{n}" >> a2beam.ReadFromPack(str(tmp_path / f"{n}.a2pack"),
                                                       with_index=True) for n in "ab"]
            _ = tuple(runs) | beam.Flatten() | a2beam.BuildDataset(tmp_path / "clash")
        run_pipeline(flattened)
    assert not (tmp_path / "clash").exists()


def test_write_to_pack_bad_input(tmp_path):
    """A run that is not one fails the write naming its key and leaves no
    pack; elements that are not runs, and keys that cannot be ordered, are
    errors that say what was expected."""
    good = make_run(1, 5).to_bytes()
    with pytest.raises(Exception, match=r"WriteToPack: some/broken\.a2run2: "):
        run_pipeline(lambda p: p | beam.Create([(b"ok.a2run2", good),
                                                 (b"some/broken.a2run2", b"A2T2 not a run")])
                     | a2beam.WriteToPack(tmp_path / "bad.a2pack"))
    assert not (tmp_path / "bad.a2pack").exists()
    with pytest.raises(Exception, match=r"takes runs \(RunV2 or run-file bytes\).*not int"):
        run_pipeline(lambda p: p | beam.Create([7]) | a2beam.WriteToPack(tmp_path / "x.a2pack"))
    with pytest.raises(Exception, match=r"keys cannot be ordered.*one type"):
        run_pipeline(lambda p: p | beam.Create([(1, good), (b"a", good)])
                     | a2beam.WriteToPack(tmp_path / "y.a2pack"))
    with pytest.raises(TypeError, match="expected_count"):
        a2beam.WriteToPack(tmp_path / "z.a2pack", expected_count=3)


def test_write_to_pack_sizes_its_own_shards(tmp_path):
    """name@*.a2pack: the shard count comes from the runs' bytes (one shard
    per GiB), not from the runner's bundles; no runs make one empty shard."""
    runs = [make_run(s, 4 + s) for s in range(6)]

    def build(p):
        _ = (p | beam.Create(runs) | "split" >> beam.Reshuffle()
             | a2beam.WriteToPack(tmp_path / "auto@*.a2pack"))
        _ = p | "none" >> beam.Create([]) | "w0" >> a2beam.WriteToPack(tmp_path / "empty.a2pack")

    run_pipeline(build)
    assert sorted(os.listdir(tmp_path)) == ["auto-00000-of-00001.a2pack", "empty.a2pack"]
    got = a2pack.PackReader(tmp_path / "auto-00000-of-00001.a2pack")
    assert sorted(got.read(i) for i in range(len(got))) == sorted(r.to_bytes() for r in runs)
    assert len(a2pack.PackReader(tmp_path / "empty.a2pack")) == 0


@pytest.fixture(autouse=True)
def no_stray_job_server_folders(ref):
    yield
    shutil.rmtree(ref / "beam-temp", ignore_errors=True)
    os.makedirs(ref / "beam-temp", exist_ok=True)
