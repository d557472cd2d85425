"""The repository speaks for itself: no tracked file names documents that
live outside it or numbers of internal history, and docs/formats.md, the
reference the code points to instead, covers every format - checked against
the bytes the library really writes."""

import pathlib
import re
import shutil
import struct
import subprocess

import numpy as np
import pytest

import a2pack
from a2pack import bag
from a2pack.dataset import EpochSampler
from a2pack.mix import MixSampler

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORMATS = ROOT / "docs" / "formats.md"

# Where the words are looked for: the sources, bindings, tests, docs and
# build files (the generated cffi module is not tracked).
SCOPE = ["include", "src", "bindings", "tests", "docs", "bench", "mk", "scripts", "cmake",
         "README.md", "pyproject.toml", "Makefile", "CMakeLists.txt"]

# What must not appear. Spelled so that this file does not match itself.
FORBIDDEN = {
    "a document outside the repository": re.compile("FORMATS" + r"\.md"),
    "a design document's number": re.compile(r"\b[Ss]eeds?[ _-]?0\d\d\b"),
    "an issue number": re.compile(r"\b[Ii]ssues?[ #]+\d+"),
    "a session number": re.compile(r"\b[Ss]essions?[ #]+\d+"),
}
# Prose (docs, README) names no folder beside the repository; code may look
# for the upstream fixture there (Makefile, CMake, the test helpers).
PROSE_FORBIDDEN = re.compile(r"\.\./shared|shared/fixtures")


def tracked_files():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--", *SCOPE],
                       capture_output=True, check=True)
    return [ROOT / p for p in r.stdout.decode().split("\0") if p]


def text_of(path):
    data = path.read_bytes()
    if b"\0" in data:
        return None  # fuzz inputs and other binary files
    return data.decode("utf-8", errors="replace")


def test_no_tracked_file_names_outside_documents_or_history_numbers():
    files = tracked_files()
    assert len(files) > 100, files  # the listing worked
    found = []
    for path in files:
        text = text_of(path)
        if text is None:
            continue
        rel = path.relative_to(ROOT).as_posix()
        for lineno, line in enumerate(text.splitlines(), 1):
            for what, pattern in FORBIDDEN.items():
                m = pattern.search(line)
                if m:
                    found.append(f"{rel}:{lineno}: {what}: {m.group(0)!r}")
            if (rel.startswith("docs/") or rel == "README.md") and PROSE_FORBIDDEN.search(line):
                found.append(f"{rel}:{lineno}: a folder beside the repository in prose")
    assert not found, "\n".join(found)


def test_the_check_catches_what_it_looks_for():
    bad = ["see " + "FORMATS" + ".md, section 4", "the design of seed" + " 003",
           "(seed-" + "004)", "Issue" + " 23: limits", "session" + " 7 left this"]
    for line in bad:
        assert any(p.search(line) for p in FORBIDDEN.values()), line
    good = ["seed=0", "a seeded permutation", "--seed 2048", "the fuzz seeds", "an issued ticket",
            "docs/formats.md, packfiles"]
    for line in good:
        assert not any(p.search(line) for p in FORBIDDEN.values()), line


@pytest.fixture(scope="module")
def doc():
    assert FORMATS.exists(), "docs/formats.md is missing"
    return FORMATS.read_text(encoding="utf-8")


def test_formats_md_names_every_format_and_is_linked(doc):
    for word in ["A2T1", "A2PACK", r"\x93NUMPY", "SQLite format 3", "a2pack-steps",
                 "a2pack-append-journal", "steps-00000.npy", ".bagz", "limits.NAME",
                 "-00000-of-00004", "A2LG", "0x184D2A5A", "a2pack-logger-stream",
                 "scales_crc32c", "single-folder layout", "A2FS", "A2SS", "A2MS", "A2BS",
                 "one LZ4 frame", "one zstd frame"]:
        assert word in doc, word
    assert "formats.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "formats.md" in (ROOT / "docs" / "README.md").read_text(encoding="utf-8")


def hex_in_doc(doc, data):
    """`data` written as formats.md writes bytes ("41 32 50 ..."), found in it."""
    return " ".join(f"{b:02x}" for b in data) in doc.lower()


def test_documented_magics_and_sizes_are_what_the_library_writes(doc, tmp_path):
    runs = tmp_path / "runs"
    a2pack.generate_dir(runs, 4, seed=3, policy="greedy", max_steps=200)
    paths = sorted(runs.glob("*.a2run2"))

    # Run files: v1 magic and size, v2 without magic.
    run = a2pack.RunV2.load(paths[0])
    v1 = run.to_bytes("v1", drop_branches=True)
    assert v1[:5] == b"A2T1\x01" and hex_in_doc(doc, v1[:5])
    engine_len = struct.unpack_from("<H", v1, 34)[0]
    assert len(v1) == 48 + engine_len + 9 * len(run)  # "exactly 48 + L + 9 · steps"
    assert "48 + L + 9 · steps" in doc

    # Packfiles: magic, version 1 stored / 2 compressed, entry flags and reserved.
    stored, packed = tmp_path / "s.a2pack", tmp_path / "z.a2pack"
    a2pack.pack_dir(runs, stored)
    a2pack.pack_dir(runs, packed, compress="zstd")
    s, z = stored.read_bytes(), packed.read_bytes()
    assert s[:8] == z[:8] == b"A2PACK\0\0" and hex_in_doc(doc, s[:8])
    assert struct.unpack_from("<I", s, 8)[0] == 1 and struct.unpack_from("<I", z, 8)[0] == 2
    flags = [struct.unpack_from("<H", z, 28 + 32 * i + 14)[0] for i in range(len(paths))]
    assert 1 in flags
    for i, f in enumerate(flags):
        reserved = struct.unpack_from("<I", z, 28 + 32 * i + 20)[0]
        assert reserved == (paths[i].stat().st_size if f == 1 else 0)

    # Step datasets: the NPY header and the manifest's format.
    a2pack.build_dataset(runs, tmp_path / "ds")
    npy = (tmp_path / "ds" / "steps.npy").read_bytes()
    assert npy[:10] == b"\x93NUMPY\x01\x00" + struct.pack("<H", 246) and npy[255:256] == b"\n"
    assert "`246`" in doc and "| 256 | 32 · N |" in doc
    assert '"a2pack-steps"' in (tmp_path / "ds" / "manifest.json").read_text()

    # Record files: the tail-placement example of the doc, byte for byte.
    with bag.Writer(str(tmp_path / "x.bag")) as w:
        for r in (b"abcdef", b"123", b"catcat"):
            w.write(r)
    data = (tmp_path / "x.bag").read_bytes()
    assert data == b"abcdef123catcat" + struct.pack("<3Q", 6, 9, 15)
    assert hex_in_doc(doc, data[15:23]) and hex_in_doc(doc, data[31:39])

    # Logger segments: the constant first 12 bytes of a block header.
    with a2pack.DataLogger(tmp_path / "log") as log:
        sid = log.register_stream({"m": 1}, epoch_scale=0.5, value_scale=0.5)
        log.record(sid, 1.0, np.array([3, 7], np.uint32), np.array([1.5, -2.0]))
    seg = (tmp_path / "log" / "segments" / "00000.seg.zst").read_bytes()
    assert hex_in_doc(doc, seg[:12]) and seg[12] == 3

    # Checkpoint strings: magic and size as documented.
    st = EpochSampler(n=100, batch_size=10, seed=1).state(2)
    assert st[:4] == b"A2SS" and len(st) == 64 and "`A2SS` (64 bytes)" in doc
    for k in (1, 3):
        st = MixSampler([50] * k, [1.0] * k, batch_size=8, seed=1).state(0)
        assert st[:4] == b"A2MS" and len(st) == 44 + 32 * k
    assert "`A2MS` (44 + 32 · k bytes)" in doc
    ds = a2pack.Dataset(tmp_path / "ds")
    feed = a2pack.Feed(ds, batch_size=16, seed=0, epochs=1)
    try:
        next(iter(feed))
        st = feed.state_dict()["state"]
    finally:
        feed.close()
    assert st[:4] == b"A2FS" and st[28:32] == b"A2SS" and len(st) == 96
    assert struct.unpack_from("<I", st, 24)[0] == 64
    assert "`A2FS` (32 + inner length bytes)" in doc and "is 96 bytes" in doc
    a2pack.build_dataset(runs, tmp_path / "dss", shard_rows=50)
    stream = a2pack.ShardStream(tmp_path / "dss", batch_size=16, budget_bytes=1 << 24, seed=0)
    st = stream.state_dict()["a2pack_shard_stream"]  # a feed's, around the block order's
    assert st[:4] == b"A2FS" and st[28:32] == b"A2BS" and len(st) == 32 + 76
    assert "`A2BS` (76 bytes)" in doc
