"""Record files under hostile input: a documented
limit on the decoded size of a record, enforced from the frame header before
anything is allocated; `bag cat --lengths` without decompressing; unreferenced
bytes after the last limit of a separate-limits file reported (warning, or an
error in strict mode) while the records returned stay those bagz returns."""

import os
import pathlib
import struct
import subprocess
import sys
import warnings

import pytest

import a2pack
from a2pack import bag, errors

bagz = pytest.importorskip("bagz")


from cli_util import CLI

BLOCK = 128 << 10  # zstd's largest block


def rle_frame(size: int, sized: bool = True, byte: int = 0) -> bytes:
    """A zstd frame of `size` copies of `byte` made of RLE blocks (4 bytes per
    128 KiB decoded): 2e9 bytes take 61 KB. With `sized` the header carries
    the content size (single segment); else only a window size."""
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    if sized:
        out.append(0xA0 if size < (1 << 32) else 0xE0)  # FCS 4 or 8 bytes, single segment
        out += struct.pack("<I" if size < (1 << 32) else "<Q", size)
    else:
        out.append(0x00)  # no content size
        out.append(0x38)  # window 128 KiB
    left = size
    while True:
        n = min(BLOCK, left)
        left -= n
        last = 1 if left == 0 else 0
        out += struct.pack("<I", (n << 3) | (1 << 1) | last)[:3]
        out.append(byte)
        if last:
            return bytes(out)


def write_raw_bagz(path, records):
    """A .bagz whose records are the given bytes, stored as they are."""
    with bag.Writer(str(path), bag.Writer.Options(compression=bag.CompressionNone())) as w:
        for r in records:
            w.write(r)
    return str(path)


def test_rle_frame_is_what_bagz_decodes(tmp_path):
    p = write_raw_bagz(tmp_path / "x.bagz", [rle_frame(300000, byte=7), rle_frame(5, sized=False)])
    assert bagz.Reader(p)[0] == b"\x07" * 300000
    assert bag.Reader(p)[0] == bagz.Reader(p)[0]
    assert bag.Reader(p)[1] == bagz.Reader(p)[1] == b"\x00" * 5


@pytest.mark.parametrize("sized", [True, False], ids=["content-size", "no-content-size"])
def test_max_record_bytes_refused_before_allocation(tmp_path, sized):
    p = write_raw_bagz(tmp_path / "bomb.bagz", [b"", rle_frame(3 << 20, sized), rle_frame(100)])
    r = bag.Reader(p, bag.Reader.Options(max_record_bytes=1 << 20))
    assert r[2] == b"\x00" * 100 and r[0] == b""
    for call in (lambda: r[1], lambda: r.read_indices([2, 1]), lambda: list(r),
                 lambda: r.read_indices_iter([1])):
        with pytest.raises(errors.UnsupportedError) as e:
            x = call()
            list(x) if not isinstance(x, (bytes, list)) else x
        msg = str(e.value)
        assert "bomb.bagz" in msg and "record 1" in msg and str(1 << 20) in msg, msg
        assert "max_record_bytes" in msg
    # Raised, the record reads, the same as bagz reads it.
    big = bag.Reader(p, bag.Reader.Options(max_record_bytes=4 << 20))
    assert big[1] == bagz.Reader(p)[1]
    # The default is documented and exposed.
    assert bag.Reader.Options().max_record_bytes == 1 << 30
    with pytest.raises(ValueError):
        bag.Reader.Options(max_record_bytes=0)


def test_two_gigabyte_frame_default_limit_and_lengths_without_decoding(tmp_path):
    p = write_raw_bagz(tmp_path / "bomb.bagz", [rle_frame(2 * 10**9), rle_frame(10)])
    assert os.path.getsize(p) < 70_000
    with pytest.raises(errors.UnsupportedError, match=r"bomb\.bagz: record 0: .*1073741824"):
        bag.Reader(p)[0]
    # The lengths come from the frame header: nothing is decompressed, so the
    # CLI's peak memory stays far below the 2 GB the record would need (it
    # reached 3.9 GB when every record was decoded).
    # (Measured in a fresh parent, so no other child of this test run counts.)
    probe = ("import resource, subprocess, sys; "
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stderr.write(p.stderr); sys.stdout.write(p.stdout); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")
    out = subprocess.run([sys.executable, "-c", probe, str(CLI), "bag", "cat", "--lengths", p],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    *lines, peak_kib = out.stdout.splitlines()
    assert lines == ["0\t2000000000", "1\t10"]
    assert int(peak_kib) < 256 * 1024, peak_kib
    out = subprocess.run([str(CLI), "bag", "cat", "--lengths", "-i", "1,0", p],
                         capture_output=True, text=True)
    assert out.stdout == "1\t10\n0\t2000000000\n"
    # Reading it through the CLI fails naming file, record and limit.
    out = subprocess.run([str(CLI), "bag", "cat", p], capture_output=True, text=True)
    assert out.returncode != 0 and "record 0" in out.stderr and "1073741824" in out.stderr


def test_lengths_of_unsized_frames_are_counted_up_to_the_limit(tmp_path):
    p = write_raw_bagz(tmp_path / "u.bagz", [rle_frame(5 << 20, sized=False), rle_frame(9, sized=False)])
    out = subprocess.run([str(CLI), "bag", "cat", "--lengths", p], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"0\t{5 << 20}\n1\t9\n"
    out = subprocess.run([str(CLI), "bag", "cat", "--lengths", "--max-record-bytes", "1048576", p],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "u.bagz: record 0" in out.stderr and "1048576" in out.stderr


# ---------------------------------------------------------------- unreferenced tails

RECORDS = [b"rec-%d" % i * 3 for i in range(10)]


def _separate(tmp_path, cut_limits: int):
    path = tmp_path / "s.bag"
    opts = bagz.Writer.Options(limits_placement=bagz.LimitsPlacement.SEPARATE)
    with bagz.Writer(str(path), opts) as w:
        for r in RECORDS:
            w.write(r)
    limits = tmp_path / "limits.s.bag"
    data = limits.read_bytes()
    limits.write_bytes(data[:len(data) - 8 * cut_limits])
    return str(path)


def test_truncated_separate_limits_warn_and_read_like_bagz(tmp_path):
    p = _separate(tmp_path, cut_limits=2)
    theirs = list(bagz.Reader(p, bagz.Reader.Options(limits_placement=bagz.LimitsPlacement.SEPARATE)))
    assert theirs == RECORDS[:8]  # bagz reads the shorter bag, silently
    with pytest.warns(bag.UnreferencedBytesWarning, match=r"s\.bag: \d+ bytes after the last limit"):
        r = bag.Reader(p, bag.Reader.Options(limits_placement=bag.LimitsPlacement.SEPARATE))
    assert list(r) == theirs
    with pytest.raises(errors.CorruptError, match="strict"):
        bag.Reader(p, bag.Reader.Options(limits_placement=bag.LimitsPlacement.SEPARATE, strict=True))
    # CLI: a warning on stderr, the records on stdout, rc 0; --strict fails.
    out = subprocess.run([str(CLI), "bag", "cat", "--separate", "--lengths", p],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.count("\n") == 8
    assert "warning:" in out.stderr and "limits.s.bag" in out.stderr
    out = subprocess.run([str(CLI), "bag", "cat", "--separate", "--strict", p],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "after the last limit" in out.stderr


def test_intact_separate_limits_are_quiet(tmp_path):
    p = _separate(tmp_path, cut_limits=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = bag.Reader(p, bag.Reader.Options(limits_placement=bag.LimitsPlacement.SEPARATE, strict=True))
    assert list(r) == RECORDS
    out = subprocess.run([str(CLI), "bag", "cat", "--separate", "--strict", "--lengths", p],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == ""
