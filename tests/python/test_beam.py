"""a2pack.beam on Apache Beam's DirectRunner: record files (the tests that
ship with bagz.beam, with only the import changed, plus cross-reads with the
real bagz package), packfiles, BuildDataset against `a2pack dataset build`,
splitting, counters, display data and bad input.

The multi-process tests run the DirectRunner with
direct_running_mode='multi_processing' and direct_num_workers=2; several
checks share one pipeline each to keep the suite fast (each pipeline starts
worker processes)."""

import filecmp
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

beam = pytest.importorskip("apache_beam")
from apache_beam.io import source_test_utils  # noqa: E402
from apache_beam.metrics.metric import MetricsFilter  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from apache_beam.testing import test_pipeline, util  # noqa: E402
from apache_beam.transforms.display import DisplayData  # noqa: E402

import a2pack  # noqa: E402
from a2pack import beam as a2beam  # noqa: E402
from a2pack.dataset_rows import write_dataset  # noqa: E402
from beam_ddp_helpers import make_run, write_run_folder  # noqa: E402
from cli_util import cli_of_loaded_library  # noqa: E402



@pytest.fixture(autouse=True, scope="module")
def beam_temp_folders(tmp_path_factory):
    """Beam's DirectRunner hands each pipeline to a Prism job server, which
    makes an empty `beam-temp*` folder under the temp dir and does not
    remove it: they go under this module's own folder, removed after."""
    root = tmp_path_factory.mktemp("beam-job-server")
    before, tempfile.tempdir = tempfile.tempdir, str(root)
    yield
    tempfile.tempdir = before
    shutil.rmtree(root, ignore_errors=True)


# ---- the tests of bagz/beam/bagzio_test.py, with only the import changed ----
from a2pack import beam as bagzio  # was: from bagz.beam import bagzio
from a2pack import bag as bagz     # was: import bagz

SPECS = ["output@2.bagz", "output@2.data.bagz", "output@*.bagz", "output.extra@2.bagz",
         "output@2.bag", "output.bag@0"]


@pytest.mark.parametrize("file_path", SPECS)
def test_write_to_bagz(tmp_path, file_path):
    name = os.path.join(tmp_path, file_path)
    records = [b"a", b"b", b"c", b"d"]
    with test_pipeline.TestPipeline() as p:
        _ = p | beam.Create(records) | bagzio.WriteToBagz(name)
    reader = bagz.Reader(name[:-2] if name.endswith("@0") else name)
    assert sorted(reader.read()) == sorted(records)


@pytest.mark.parametrize("file_path", ["output.txt", "output@2", "output@2.bagzext"])
def test_write_to_bagz_invalid_paths(file_path):
    with pytest.raises(ValueError, match=f'File path "{re.escape(file_path)}" must be in the form'):
        bagzio.WriteToBagz(file_path)


@pytest.mark.parametrize("file_path", SPECS)
def test_write_and_read(tmp_path, file_path):
    name = os.path.join(tmp_path, file_path)
    records = [b"a", b"b", b"c", b"d"]
    with test_pipeline.TestPipeline() as p:
        _ = p | beam.Create(records) | bagzio.WriteToBagz(name)
    with test_pipeline.TestPipeline() as p:
        read_records = p | bagzio.ReadFromBagz(name[:-2] if name.endswith("@0") else name)
        util.assert_that(read_records, util.equal_to(records))


# ---------------------------------------------------------------- helpers
def mp_options(**extra):
    return PipelineOptions(runner="DirectRunner", direct_running_mode="multi_processing",
                           direct_num_workers=2, **extra)


def counters(result) -> dict:
    out = {}
    for c in result.metrics().query(MetricsFilter().with_namespace(a2beam.NAMESPACE))["counters"]:
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + c.committed
    return out


def records(n, seed=0):
    rng = np.random.default_rng(seed)
    return [bytes(rng.integers(0, 256, size=int(rng.integers(0, 40)), dtype=np.uint8)) + b"%d" % i
            for i in range(n)]


def write_bag(spec_files, recs):
    """Records split over the given shard files, written locally."""
    per = -(-len(recs) // len(spec_files))
    for k, f in enumerate(spec_files):
        with a2pack.bag.Writer(f) as w:
            for r in recs[k * per:(k + 1) * per]:
                w.write(r)


# ------------------------------------------------------- multi-process reads
def test_reads_match_local_reads_multiprocess(tmp_path):
    """ReadFromBag over 3 shards and ReadFromPack over a glob of 2 packs,
    split into bundles of a few records, on 2 worker processes: the same
    elements as a local read (order aside), and counters that add up."""
    recs = records(90)
    write_bag([tmp_path / f"data-{k:05d}-of-00003.bagz" for k in range(3)], recs)
    runs = [make_run(s, 5 + s % 9) for s in range(24)]
    for k in range(2):
        with a2pack.PackWriter(tmp_path / f"runs-{k}.a2pack") as w:
            for r in runs[k * 12:(k + 1) * 12]:
                w.add(r)
    local_bag = list(a2pack.bag.Reader(str(tmp_path / "data@3.bagz")))
    assert sorted(local_bag) == sorted(recs)
    local_runs = [r.to_bytes() for f in sorted(tmp_path.glob("runs-*.a2pack"))
                  for r in a2pack.PackReader(f)]

    p = beam.Pipeline(options=mp_options())
    bag = p | "bag" >> a2beam.ReadFromBag(str(tmp_path / "data@3.bagz"), records_per_split=7)
    util.assert_that(bag, util.equal_to(local_bag), label="bag")
    packs = (p | "pack" >> a2beam.ReadFromPack(str(tmp_path / "runs-*.a2pack"),
                                               records_per_split=5)
             | "enc" >> beam.Map(lambda r: r.to_bytes()))
    util.assert_that(packs, util.equal_to(local_runs), label="pack")
    raw = p | "raw" >> a2beam.ReadFromPack(str(tmp_path / "runs-*.a2pack"), decoded=False,
                                           with_index=True, records_per_split=3)
    util.assert_that(raw | "idx" >> beam.Map(lambda kv: kv[0]), util.equal_to(list(range(24))),
                     label="raw-index")
    util.assert_that(raw | "bytes" >> beam.Map(lambda kv: a2pack.RunV2.from_bytes(kv[1]).to_bytes()),
                     util.equal_to(local_runs), label="raw")
    result = p.run()
    result.wait_until_finish()
    c = counters(result)
    assert c["records_read"] == 90 + 24 + 24
    assert c["bytes_read"] >= sum(map(len, recs))


def test_round_trips_every_shard_form_multiprocess(tmp_path):
    """WriteToBag for every shard spec form and WriteToPack (single and
    sharded) in one multi-process pipeline, then read back in another."""
    recs = records(40, seed=1)
    runs = [make_run(100 + s, 4 + s) for s in range(10)]
    bag_specs = SPECS + ["other@0.bagz", "five@5.bagz"]
    p = beam.Pipeline(options=mp_options())
    src = p | "recs" >> beam.Create(recs)
    for k, spec in enumerate(bag_specs):
        _ = src | f"w{k}" >> a2beam.WriteToBag(str(tmp_path / f"d{k}" / spec))
    rsrc = p | "runs" >> beam.Create(runs)
    _ = rsrc | "p1" >> a2beam.WriteToPack(str(tmp_path / "one.a2pack"))
    _ = rsrc | "p3" >> a2beam.WriteToPack(str(tmp_path / "three@3.a2pack"), compress="zstd")
    result = p.run()
    result.wait_until_finish()
    assert counters(result)["records_written"] == 40 * len(bag_specs) + 2 * 10

    assert sorted(os.listdir(tmp_path / "d7")) == [f"five-{k:05d}-of-00005.bagz" for k in range(5)]
    assert os.listdir(tmp_path / "d6") == ["other.bagz"]
    p = beam.Pipeline(options=mp_options())
    for k, spec in enumerate(bag_specs):
        path = str(tmp_path / f"d{k}" / spec)
        path = path[:-2] if path.endswith("@0") else path.replace("@0.", ".")
        util.assert_that(p | f"r{k}" >> a2beam.ReadFromBag(path, records_per_split=9),
                         util.equal_to(recs), label=f"check{k}")
    want = [r.to_bytes() for r in runs]
    for name, pat in (("one", "one.a2pack"), ("three", "three-*-of-00003.a2pack")):
        got = (p | f"rp-{name}" >> a2beam.ReadFromPack(str(tmp_path / pat))
               | f"enc-{name}" >> beam.Map(lambda r: r.to_bytes()))
        util.assert_that(got, util.equal_to(want), label=f"pack-{name}")
    p.run().wait_until_finish()
    assert a2pack.PackReader(tmp_path / "three-00001-of-00003.a2pack").entry(0).compression in (
        "zstd", "none")  # zstd when it saves space


def test_bag_files_move_between_a2pack_and_bagz_beam(tmp_path):
    """The real bagz.beam writes, a2pack.beam reads, and the other way."""
    bagzio_real = pytest.importorskip("bagz.beam.bagzio")
    import bagz as real_bagz
    recs = records(30, seed=2)
    with test_pipeline.TestPipeline() as p:
        src = p | beam.Create(recs)
        _ = src | "theirs" >> bagzio_real.WriteToBagz(str(tmp_path / "theirs@2.bagz"))
        _ = src | "ours" >> a2beam.WriteToBag(str(tmp_path / "ours@2.bagz"))
    with test_pipeline.TestPipeline() as p:
        util.assert_that(p | a2beam.ReadFromBag(str(tmp_path / "theirs@2.bagz")),
                         util.equal_to(recs))
    assert sorted(real_bagz.Reader(str(tmp_path / "ours@2.bagz")).read()) == sorted(recs)


# ------------------------------------------------------------- splitting
def test_dynamic_splitting_bag_and_pack(tmp_path):
    """Beam's own source checks: bundles from split() read what the whole
    source reads, and splitting a range while it is being read (at every
    fraction, after every record) loses and repeats nothing."""
    write_bag([tmp_path / f"s-{k:05d}-of-00002.bagz" for k in range(2)], records(17, seed=3))
    bag_src = a2beam.ReadFromBag(str(tmp_path / "s@2.bagz"), records_per_split=4)._source
    bundles = list(bag_src.split(desired_bundle_size=1 << 20))
    assert len(bundles) == 5
    source_test_utils.assert_sources_equal_reference_source(
        (bag_src, None, None), [(b.source, b.start_position, b.stop_position) for b in bundles])
    source_test_utils.assert_split_at_fraction_exhaustive(bag_src)

    with a2pack.PackWriter(tmp_path / "p.a2pack") as w:
        for s in range(9):
            w.add(make_run(s, 3))
    pack_src = a2beam.ReadFromPack(str(tmp_path / "p.a2pack"), decoded=False)._source
    source_test_utils.assert_split_at_fraction_exhaustive(pack_src)
    # A split during the read moves the rest to the other half.
    tracker = pack_src.get_range_tracker(None, None)
    it = iter(pack_src.read(tracker))
    next(it), next(it)
    assert tracker.try_split(4) is not None
    assert len(list(it)) == 2  # entries 2 and 3; 4.. belong to the residual


# ------------------------------------------------------------- datasets
def test_build_dataset_identical_to_cli_and_bad_runs_counted(tmp_path, monkeypatch):
    """BuildDataset from a run folder and from a pack (multi-process, rows
    made by the workers) writes the bytes `a2pack dataset build` writes for
    the same runs: steps.npy, metadata.db and manifest.json, whose time stamps
    are the build time, fixed for both by SOURCE_DATE_EPOCH (reproducible
    builds); a bad run is counted, reported and skipped; with skip_bad=False
    it fails."""
    # Set before the CLI runs and before Beam starts its worker processes.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    good = tmp_path / "runs"
    write_run_folder(good, 14)
    bad = tmp_path / "runs_bad"
    write_run_folder(bad, 14)
    (bad / "b" / "zz-broken.a2run2").write_bytes(b"A2T2 this is not a run")
    # The tool built with the library this process (and so Beam's workers)
    # loaded: metadata.db's bytes depend on the SQLite inside the library.
    cli = cli_of_loaded_library()
    subprocess.run([str(cli), "pack", "--input", str(good), "--output", str(tmp_path / "r.a2pack")],
                   check=True, capture_output=True)
    for inp, out in ((good, "cli_dir"), (tmp_path / "r.a2pack", "cli_pack")):
        subprocess.run([str(cli), "dataset", "build", "--input", str(inp),
                        "--out", str(tmp_path / out)], check=True, capture_output=True)

    p = beam.Pipeline(options=mp_options())
    _ = (p | "dir" >> a2beam.ReadRunFiles(good)
         | "b1" >> a2beam.BuildDataset(tmp_path / "beam_dir", source_input=str(good),
                                        source_kind="dir"))
    _ = (p | "pack" >> a2beam.ReadFromPack(str(tmp_path / "r.a2pack"), with_index=True,
                                           records_per_split=4)
         | "b2" >> a2beam.BuildDataset(tmp_path / "beam_pack",
                                        source_input=str(tmp_path / "r.a2pack"),
                                        source_kind="pack"))
    summary = (p | "bad" >> a2beam.ReadRunFiles(bad)
               | "b3" >> a2beam.BuildDataset(tmp_path / "beam_bad", source_input=str(good),
                                              source_kind="dir"))
    util.assert_that(summary | beam.Map(lambda s: (s["runs"], [b[0] for b in s["bad_runs"]])),
                     util.equal_to([(14, ["b/zz-broken.a2run2"])]), label="summary")
    result = p.run()
    result.wait_until_finish()
    c = counters(result)
    assert c["bad_runs_skipped"] == 1
    assert c["runs_built"] == 3 * 14

    def same(a, b):
        for f in ("steps.npy", "metadata.db", "manifest.json"):
            assert filecmp.cmp(a / f, b / f, shallow=False), f"{f} differs: {a} vs {b}"
        assert sorted(os.listdir(a)) == sorted(os.listdir(b))
        assert '"created": "2023-11-14T22:13:20Z"' in (a / "manifest.json").read_text()

    same(tmp_path / "beam_dir", tmp_path / "cli_dir")
    same(tmp_path / "beam_pack", tmp_path / "cli_pack")
    same(tmp_path / "beam_bad", tmp_path / "cli_dir")  # the bad run left out
    a2pack.verify_dataset(tmp_path / "beam_dir")

    with pytest.raises(Exception, match="zz-broken"):
        with test_pipeline.TestPipeline() as p:
            _ = (p | a2beam.ReadRunFiles(bad)
                 | a2beam.BuildDataset(tmp_path / "strict", skip_bad=False))
    assert not (tmp_path / "strict").exists()


def test_rows_that_do_not_match_their_runs_are_refused(tmp_path):
    """The library checks the rows handed to it against the runs' step
    counts: a row with the wrong step_index is an error naming the row, and
    nothing is written."""
    from a2pack.dataset_rows import run_rows
    runs = [run_rows(make_run(s, 4)) for s in range(3)]
    runs[1][1]["step_index"][2] = 7
    with pytest.raises(a2pack.InvalidArgumentError, match=r"row 6: run_id 1 step_index 7"):
        write_dataset(tmp_path / "ds", runs)
    assert not (tmp_path / "ds").exists()
    runs[1][1]["step_index"][2] = 2
    assert write_dataset(tmp_path / "ds", runs)["rows"] == 12
    a2pack.verify_dataset(tmp_path / "ds")


def test_build_dataset_refuses_existing_and_missing_branches(tmp_path):
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "notes.txt").write_text("mine")
    runs = [make_run(1, 5), make_run(2, 6, branches=False)]
    with pytest.raises(Exception, match="no branch values"):
        with test_pipeline.TestPipeline() as p:
            _ = (p | beam.Create(list(enumerate(runs)))
                 | a2beam.BuildDataset(tmp_path / "x", skip_bad=False))
    with test_pipeline.TestPipeline() as p:
        _ = (p | beam.Create(list(enumerate(runs)))
             | a2beam.BuildDataset(tmp_path / "y", allow_missing_branches=True))
    assert len(a2pack.Dataset(tmp_path / "y")) == 11
    with pytest.raises(Exception, match="does not look like a dataset"):
        with test_pipeline.TestPipeline() as p:
            _ = (p | beam.Create(list(enumerate(runs)))
                 | a2beam.BuildDataset(tmp_path / "ds", overwrite=True,
                                       allow_missing_branches=True))
    assert os.listdir(tmp_path / "ds") == ["notes.txt"]


# ------------------------------------------------------------- metadata
def test_display_data(tmp_path):
    write_bag([tmp_path / "a.bagz"], [b"x"])
    with a2pack.PackWriter(tmp_path / "p.a2pack") as w:
        w.add(make_run(1, 2))
    items = {
        "bag": a2beam.ReadFromBag(str(tmp_path / "a.bagz")),
        "wbag": a2beam.WriteToBag(str(tmp_path / "o@2.bagz")),
        "pack": a2beam.ReadFromPack(str(tmp_path / "p.a2pack")),
        "wpack": a2beam.WriteToPack(str(tmp_path / "o.a2pack"), compress="zstd"),
        "ds": a2beam.BuildDataset(tmp_path / "ds"),
        "files": a2beam.ReadRunFiles(tmp_path),
    }
    shown = {k: {i.key: i.value for i in DisplayData.create_from(t).items}
             for k, t in items.items()}
    assert shown["bag"]["file_pattern"] == str(tmp_path / "a.bagz")
    assert shown["pack"]["entries"] == 1
    assert "zstd" in shown["wpack"]["writer_options"]
    assert shown["ds"]["out_dir"] == str(tmp_path / "ds")
    assert shown["files"]["folder"] == str(tmp_path)
    assert "file_pattern" in shown["wbag"]


def test_clear_error_without_apache_beam():
    code = ("import sys; sys.modules['apache_beam'] = None\n"
            "import a2pack\n"
            "try:\n    import a2pack.beam\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'a2pack[beam]'" in out.stdout


def test_read_from_pack_skips_and_counts_a_bad_entry(tmp_path):
    runs = [make_run(200 + s, 6) for s in range(5)]
    path = tmp_path / "p.a2pack"
    with a2pack.PackWriter(path) as w:
        for r in runs:
            w.add(r)
    e = a2pack.PackReader(path).entry(2)
    data = bytearray(path.read_bytes())
    data[e.offset + e.length // 2] ^= 0xFF  # entry 2's CRC no longer matches
    path.write_bytes(bytes(data))
    p = beam.Pipeline()
    got = p | a2beam.ReadFromPack(str(path), with_index=True) | beam.Map(lambda kv: kv[0])
    util.assert_that(got, util.equal_to([0, 1, 3, 4]))
    result = p.run()
    result.wait_until_finish()
    c = counters(result)
    assert c["bad_runs_skipped"] == 1 and c["records_read"] == 4
    with pytest.raises(Exception, match="entry 2|CRC|checksum"):
        with beam.Pipeline() as p:
            _ = p | a2beam.ReadFromPack(str(path), skip_bad=False)
