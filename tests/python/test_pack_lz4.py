"""lz4 packfile entries (`a2pack pack --compress lz4`, entry flags 2): the CLI,
the Python writer and reader and the readers built on them (ai_2048, Arrow)
on lz4 packs; a pack mixing stored, zstd and lz4 entries; damaged frames
refused naming the entry. The system's `lz4` tool, an LZ4 implementation
independent of the library's, checks that entries are plain LZ4 frames and
makes frames the reader must take.
"""

import json
import re
import shutil
import struct
import subprocess

import numpy as np
import pytest

import a2pack
from a2pack.run import Meta

from cli_util import CLI

if not CLI.exists():
    raise RuntimeError(f"no a2pack CLI at {CLI}: build it and set A2PACK_CLI")

LZ4_TOOL = shutil.which("lz4")
needs_lz4_tool = pytest.mark.skipif(LZ4_TOOL is None, reason="the lz4 tool (Debian's lz4) is not installed")
LZ4_MAGIC = b"\x04\x22\x4d\x18"


def run(*args, ok=True):
    p = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=120)
    if ok:
        assert p.returncode == 0, p.stderr
    else:
        assert p.returncode != 0, p.stdout
    return p


def crc32c(data):
    """CRC32C (Castagnoli), table-driven."""
    table = crc32c.table
    crc = 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _crc_table():
    t = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
        t.append(c)
    return t


crc32c.table = _crc_table()


def make_run(seed, n):
    """A v2 run with branches whose boards and values repeat, as real games'
    do enough for every codec to shrink it."""
    i = np.arange(n)
    boards = (0x0123456789AB0000 + (i % 48) * 0x111 + seed).astype(np.uint64)
    moves = (i % 4).astype(np.uint8)
    values = np.tile(np.array([1.0, 0.5, 0.25, 0.0], np.float32), (n, 1))
    meta = Meta(n, 1_700_000_000 + seed, 1.5, 40 * seed, 1024 << (seed % 2),
                "expectimax-d2" if seed % 3 else None)
    return a2pack.RunV2.from_arrays(meta, boards, moves, values, np.full(n, 0xF, np.uint8), None,
                                    final_board=seed)


@pytest.fixture
def runs(tmp_path):
    """A folder of 9 runs (one of them v1) and their bytes in pack order."""
    d = tmp_path / "runs"
    d.mkdir()
    for k in range(9):
        r = make_run(k, 200 + 37 * k)
        data = r.to_bytes("v1", drop_branches=True) if k == 4 else r.to_bytes()
        (d / f"r{k}.a2run2").write_bytes(data)
    return d, [(d / f"r{k}.a2run2").read_bytes() for k in range(9)]


def header_version(path):
    return struct.unpack_from("<I", path.read_bytes(), 8)[0]


def index_entry(b, i):
    """(offset, length, kind, flags, crc, reserved) of index entry i."""
    return struct.unpack_from("<QIHHII", b, 28 + 32 * i)


def set_index_entry(b, i, count, **fields):
    """Change index entry i's fields and recompute the index and footer CRCs."""
    b = bytearray(b)
    names = ("offset", "length", "kind", "flags", "crc", "reserved")
    e = dict(zip(names, index_entry(b, i)))
    e.update(fields)
    struct.pack_into("<QIHHII", b, 28 + 32 * i, *(e[n] for n in names))
    fo = len(b) - 32
    struct.pack_into("<I", b, fo + 8, crc32c(bytes(b[28:28 + 32 * count])))
    struct.pack_into("<I", b, fo + 24, crc32c(bytes(b[fo:fo + 24])))
    return bytes(b)


def build_pack(entries, align=512):
    """A packfile written here, by the format alone (docs/pack.md), from
    (stored bytes, kind, flags, run length) tuples: header version 2, each
    payload aligned, entry CRCs, no stats block."""
    count = len(entries)
    out = bytearray(28 + 32 * count)
    index = []
    for stored, kind, flags, raw_len in entries:
        out += bytes(-len(out) % align)
        index.append(struct.pack("<QIHHII8x", len(out), len(stored), kind, flags, crc32c(stored),
                                 raw_len if flags else 0))
        out += stored
    data_end = len(out)
    out[0:28] = b"A2PACK\0\0" + struct.pack("<IIQ", 2, 0, count) + b"\0" * 4
    struct.pack_into("<I", out, 24, crc32c(bytes(out[0:24])))
    out[28:28 + 32 * count] = b"".join(index)
    footer = bytearray(struct.pack("<QIIQ", data_end, crc32c(b"".join(index)), 0, 0) + b"\0" * 8)
    struct.pack_into("<I", footer, 24, crc32c(bytes(footer[0:24])))
    return bytes(out + footer)


def lz4_tool(*args, data):
    """The lz4 tool's output for `data` on its standard input."""
    p = subprocess.run([LZ4_TOOL, *args], input=data, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def lz4_tool_frame(tmp_path, data, *args):
    """An LZ4 frame of `data` made by the lz4 tool from a file (so that
    --content-size can record the size)."""
    src = tmp_path / "frame-input"
    src.write_bytes(data)
    p = subprocess.run([LZ4_TOOL, "-c", *args, str(src)], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


# ------------------------------------------------------------------ the CLI
def test_cli_lz4_pack_validates_extracts_and_exports_as_the_stored_pack(runs, tmp_path):
    d, originals = runs
    s, z, l, hc = (tmp_path / f"{n}.a2pack" for n in ("s", "z", "l", "hc"))
    run("pack", "--input", d, "--output", s)
    run("pack", "--input", d, "--output", z, "--compress", "zstd")
    p = run("pack", "--input", d, "--output", l, "--compress", "lz4", "--workers", 2)
    assert "lz4: 9 of 9 entries compressed" in p.stderr, p.stderr
    summary = json.loads(run("pack", "--input", d, "--output", hc, "--compress", "lz4",
                             "--lz4-level", 9, "--json").stdout)
    assert summary["compressed_entries"] == 9 and summary["stored_bytes"] < summary["input_bytes"]
    assert header_version(s) == 1 and header_version(l) == header_version(hc) == 2
    assert hc.stat().st_size < l.stat().st_size < s.stat().st_size
    for pack in (l, hc):
        assert "OK" in run("validate", "--packfile", pack, "--full").stderr
        out = tmp_path / f"x-{pack.stem}"
        run("extract", "--packfile", pack, "--indices", "0-8", "--output", out)
        assert [(out / f"run-{i:06d}.a2run2").read_bytes() for i in range(9)] == originals
        for mode in ("--runs", "--steps"):
            a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
            run("to-jsonl", "--packfile", s, "--output", a, mode)
            run("to-jsonl", "--packfile", pack, "--output", b, mode, "--workers", 2)
            assert a.read_bytes() == b.read_bytes()
        stats = [json.loads(run("stats", "--packfile", p, "--json").stdout) for p in (pack, s)]
        assert stats[0].pop("packfile") == str(pack) and stats[1].pop("packfile") == str(s)
        assert stats[0] == stats[1]
    j = json.loads(run("inspect", "--packfile", l, "--index", 4, "--json").stdout)
    assert j["kind"] == "v1" and j["entry"]["storage"] == "lz4"
    assert j["entry"]["raw_length"] == len(originals[4]) > j["entry"]["length"]
    assert " lz4 (" in run("inspect", "--packfile", l, "--index", 0).stdout


def test_cli_lz4_level_limits_and_help(runs, tmp_path):
    d, _ = runs
    out = tmp_path / "bad.a2pack"
    for level in ("13", "-65537"):
        p = run("pack", "--input", d, "--output", out, "--compress", "lz4", f"--lz4-level={level}", ok=False)
        assert "lz4 level" in p.stderr and level in p.stderr, p.stderr
        assert not out.exists()
    faster = tmp_path / "faster.a2pack"
    run("pack", "--input", d, "--output", faster, "--compress", "lz4", "--lz4-level=-30")
    run("validate", "--packfile", faster, "--full")
    h = run("pack", "--help").stdout
    assert "lz4" in h and "--lz4-level" in h
    assert "--lz4-level" in run("completion", "bash").stdout
    assert "--pack-lz4" in run("bag", "convert", "--help").stdout


def test_bag_convert_writes_lz4_packs(runs, tmp_path):
    d, originals = runs
    out = tmp_path / "c.a2pack"
    run("bag", "convert", d, out, "--pack-lz4")
    with a2pack.PackReader(out) as r:
        assert [r.read(i) for i in range(len(r))] == originals
        assert {r.entry(i).compression for i in range(len(r))} == {"lz4"}
    p = run("bag", "convert", d, tmp_path / "both.a2pack", "--pack-lz4", "--pack-zstd", ok=False)
    assert "--pack-zstd" in p.stderr or "--pack-lz4" in p.stderr, p.stderr


# ------------------------------------------------------------------ Python
def test_python_writer_and_reader(runs, tmp_path):
    d, originals = runs
    assert re.fullmatch(r"\d+\.\d+\.\d+", a2pack.lz4_version)
    l = tmp_path / "l.a2pack"
    s = a2pack.pack_dir(d, l, compress="lz4", lz4_level=4, workers=2)
    assert s.entries == s.compressed_entries == 9 and s.stored_bytes < s.input_bytes
    w_path = tmp_path / "w.a2pack"
    with a2pack.PackWriter(w_path, compress="lz4", align=64) as w:
        w.add(make_run(1, 300))
        w.add(originals[4])
    assert w.summary.compressed_entries == 2
    stored = tmp_path / "s.a2pack"
    a2pack.pack_dir(d, stored)
    for mmap in (True, False):
        with a2pack.PackReader.open(l, mmap=mmap) as r, a2pack.PackReader.open(stored) as rs:
            for i, data in enumerate(originals):
                e = r.entry(i)
                assert e.compression == "lz4" and e.raw_length == len(data) > e.length
                assert r.read(i) == data
            idx = [8, 0, 4, 4, 2]
            assert r.decode_batch(idx, workers=2) == rs.decode_batch(idx)
            a, b = r.decode_batch_columns(idx), rs.decode_batch_columns(idx)
            assert np.array_equal(a.boards, b.boards) and np.array_equal(a.branch_values, b.branch_values)
            assert np.array_equal(a.step_offsets, b.step_offsets)
            assert ([x for b in r.iter_batches(4, shuffle=True, seed=5) for x in b]
                    == [x for b in rs.iter_batches(4, shuffle=True, seed=5) for x in b])
            assert (r.stats.count, r.stats.total_steps) == (rs.stats.count, rs.stats.total_steps)
            assert r.stats.highest_tile_hist == rs.stats.highest_tile_hist
            r.validate(full=True)
            if mmap:
                assert bytes(r.get_slice(0)[:4]) == LZ4_MAGIC  # the stored frame
    with a2pack.PackReader.open(w_path) as r:
        assert r.read(0) == make_run(1, 300).to_bytes() and r.read(1) == originals[4]
    with pytest.raises(ValueError, match="'lz4'"):
        a2pack.PackWriter(tmp_path / "x.a2pack", compress="lz5")
    with pytest.raises(a2pack.errors.InvalidArgumentError, match="lz4 level"):
        a2pack.PackWriter(tmp_path / "x.a2pack", compress="lz4", lz4_level=99)


def test_ai_2048_and_arrow_read_lz4_packs(runs, tmp_path):
    import ai_2048 as a2  # noqa: PLC0415 - upstream's surface over the same reader

    d, _ = runs
    l, s = tmp_path / "l.a2pack", tmp_path / "s.a2pack"
    a2pack.pack_dir(d, l, compress="lz4")
    a2pack.pack_dir(d, s)
    ul, us = a2.PackReader.open(l), a2.PackReader.open(s)
    assert [r.meta.steps for r in ul.decode_batch([3, 1])] == [r.meta.steps for r in us.decode_batch([3, 1])]
    pytest.importorskip("pyarrow")
    from a2pack import arrow  # noqa: PLC0415

    with a2pack.PackReader(l) as rl, a2pack.PackReader(s) as rs:
        for layout in ("runs", "steps"):
            assert rl.to_arrow(layout).equals(rs.to_arrow(layout))
            assert arrow.pack_to_arrow(rl, layout, entries=[7, 2]).equals(
                arrow.pack_to_arrow(rs, layout, entries=[7, 2]))


# ------------------------------------------------------------------ frames
@needs_lz4_tool
def test_entries_are_lz4_frames_the_lz4_tool_reads(runs, tmp_path):
    d, originals = runs
    l = tmp_path / "l.a2pack"
    a2pack.pack_dir(d, l, compress="lz4")
    with a2pack.PackReader(l) as r:
        for i, data in enumerate(originals):
            frame = bytes(r.get_slice(i))
            assert frame[:4] == LZ4_MAGIC
            assert lz4_tool("-d", "-c", data=frame) == data


@needs_lz4_tool
def test_a_pack_mixing_stored_zstd_and_lz4_entries_reads_everywhere(runs, tmp_path):
    """Entries of every kind in one pack, laid out here by the format alone:
    stored runs, zstd frames and lz4 frames taken from packs the library
    wrote, and lz4 frames the lz4 tool made (with the content size in the
    header, without it, and without a content checksum)."""
    d, originals = runs
    z, l, s = tmp_path / "z.a2pack", tmp_path / "l.a2pack", tmp_path / "s.a2pack"
    a2pack.pack_dir(d, z, compress="zstd")
    a2pack.pack_dir(d, l, compress="lz4")
    a2pack.pack_dir(d, s)
    entries = []
    with a2pack.PackReader(z) as rz, a2pack.PackReader(l) as rl:
        for i, data in enumerate(originals):
            kind = 1 if i == 4 else 2
            if i % 4 == 0:
                entries.append((data, kind, 0, len(data)))
            elif i % 4 == 1:
                entries.append((bytes(rz.get_slice(i)), kind, 1, len(data)))
            elif i % 4 == 2:
                entries.append((bytes(rl.get_slice(i)), kind, 2, len(data)))
            else:
                args = ["-9", "--content-size"] if i == 3 else ["-1", "--no-frame-crc"]
                entries.append((lz4_tool_frame(tmp_path, data, *args), kind, 2, len(data)))
    mixed = tmp_path / "mixed.a2pack"
    mixed.write_bytes(build_pack(entries))
    with a2pack.PackReader(mixed) as r, a2pack.PackReader(s) as rs:
        assert [r.entry(i).compression for i in range(len(r))] == [
            ("none", "zstd", "lz4", "lz4")[i % 4] for i in range(9)]
        assert [r.read(i) for i in range(len(r))] == originals
        assert r.decode_batch(list(range(9)), workers=2) == rs.decode_batch(list(range(9)))
        assert r.stats.total_steps == rs.stats.total_steps and not r.stats.from_block
        r.validate(full=True)
    assert "OK" in run("validate", "--packfile", mixed, "--full").stderr
    out = tmp_path / "x"
    run("extract", "--packfile", mixed, "--indices", "0-8", "--output", out)
    assert [(out / f"run-{i:06d}.a2run2").read_bytes() for i in range(9)] == originals
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    run("to-jsonl", "--packfile", mixed, "--output", a, "--steps")
    run("to-jsonl", "--packfile", s, "--output", b, "--steps")
    assert a.read_bytes() == b.read_bytes()


# ------------------------------------------------------------------ damage
def test_damaged_lz4_entries_are_refused_naming_the_entry(runs, tmp_path):
    d, originals = runs
    good_nocrc, good_crc = tmp_path / "n.a2pack", tmp_path / "c.a2pack"
    run("pack", "--input", d, "--output", good_nocrc, "--compress", "lz4", "--no-crc")
    run("pack", "--input", d, "--output", good_crc, "--compress", "lz4")
    b = good_nocrc.read_bytes()
    off, length, _, flags, _, reserved = index_entry(b, 2)
    assert flags == 2 and reserved == len(originals[2])

    def damaged(name, data):
        p = tmp_path / name
        p.write_bytes(data)
        return p

    cases = []
    flip = bytearray(b)
    flip[off + length - 1] ^= 0x40  # the frame's content checksum
    cases.append((damaged("checksum.a2pack", bytes(flip)), a2pack.errors.CorruptError,
                  "LZ4 frame is damaged"))
    magic = bytearray(b)
    magic[off] ^= 0xFF
    cases.append((damaged("magic.a2pack", bytes(magic)), a2pack.errors.CorruptError,
                  "does not start with a valid LZ4 frame header"))
    cases.append((damaged("size.a2pack", set_index_entry(b, 2, 9, reserved=reserved + 1)),
                  a2pack.errors.CorruptError,
                  f"LZ4 frame declares {reserved} bytes but the index says {reserved + 1}"))
    cases.append((damaged("huge.a2pack", set_index_entry(b, 2, 9, reserved=(1 << 30) + 1)),
                  a2pack.errors.CorruptError, "more than the 1073741824 allowed"))
    cases.append((damaged("short.a2pack", set_index_entry(b, 2, 9, length=length - 9)),
                  a2pack.errors.CorruptError, "LZ4 frame ends early"))
    cases.append((damaged("flags.a2pack", set_index_entry(b, 2, 9, flags=3)),
                  a2pack.errors.UnsupportedError, "unknown entry flags 0x3 (0 = stored, 1 = zstd, 2 = lz4)"))
    for path, error, says in cases:
        with a2pack.PackReader(path) as r:
            with pytest.raises(error, match=re.escape(f"entry 2: ")) as e:
                r.read(2)
            assert says in str(e.value), str(e.value)
            assert [r.read(i) for i in (0, 1, 3, 8)] == [originals[i] for i in (0, 1, 3, 8)]
        v = run("validate", "--packfile", path, "--full", ok=False)
        assert f"{path}: entry 2: " in v.stderr and says in v.stderr, v.stderr
        x = run("extract", "--packfile", path, "--indices", "2", "--output", tmp_path / "x", ok=False)
        assert "entry 2" in x.stderr and says in x.stderr, x.stderr
        run("extract", "--packfile", path, "--indices", "0,1,3", "--output", tmp_path / f"ok-{path.stem}")
    # With entry CRCs the CRC sees the damage first; reading without the CRC
    # check, the frame's own checksum still refuses it.
    c = bytearray(good_crc.read_bytes())
    off, length = index_entry(c, 2)[:2]
    c[off + length - 1] ^= 0x40
    crc_path = damaged("crc.a2pack", bytes(c))
    with a2pack.PackReader(crc_path) as r:
        with pytest.raises(a2pack.errors.ChecksumError, match="entry 2"):
            r.read(2)
        with pytest.raises(a2pack.errors.CorruptError, match="entry 2: LZ4 frame is damaged"):
            r.read(2, verify=False)
    v = run("validate", "--packfile", crc_path, ok=False)
    assert "entry 2" in v.stderr and "CRC32C mismatch" in v.stderr, v.stderr
