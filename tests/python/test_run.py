"""Run files, columnar batches, boards and the generator through Python."""

import gc

import numpy as np
import pytest

import a2pack
from a2pack.run import Meta, StepV2


def test_fixture_decodes_to_documented_values(fixture_bytes):
    r = a2pack.RunV2.from_bytes(fixture_bytes)
    m = r.meta
    assert (m.steps, m.start_unix_s, m.max_score, m.highest_tile) == (959, 1755927754, 20504, 2048)
    assert m.elapsed_s == pytest.approx(15.2595, abs=1e-3)
    assert m.engine_str is None
    assert len(r) == 959 and len(r.steps) == 959
    assert np.bincount(r.moves, minlength=4).tolist() == [78, 337, 253, 291]
    assert r.steps[0].pre_board == 0x0010000000000001
    assert r.final_board == 0x100100010232001B
    assert all(s.branches is not None for s in r.steps)
    assert r.source_kind == "v2"


def test_fixture_reencodes_byte_exact(fixture_bytes, fixture_file, tmp_path):
    r = a2pack.RunV2.load(fixture_file)
    assert r.to_bytes() == fixture_bytes
    out = tmp_path / "copy.a2run2"
    r.save(out)
    assert out.read_bytes() == fixture_bytes
    # Rebuilding from the Python-level steps gives the same bytes again.
    again = a2pack.RunV2(r.meta, r.steps, r.final_board)
    assert again.to_bytes() == fixture_bytes


def test_v1_round_trip_and_upgrade(tmp_path):
    meta = Meta(steps=3, start_unix_s=1, elapsed_s=0.5, max_score=4, highest_tile=4,
                engine_str="py")
    boards = np.array([0x1000000000000001, 0x1100000000000000, 0x2000000000000010], np.uint64)
    r = a2pack.RunV2.from_arrays(meta, boards, [2, 0, 3], final_board=0x2000000000000011)
    assert not r.has_branches
    v1 = r.to_bytes("v1")
    assert v1[:4] == b"A2T1" and a2pack.detect_kind(v1) == "v1"
    back = a2pack.RunV2.from_bytes(v1)
    assert back.source_kind == "v1"
    assert back.meta == meta
    assert back.states.tolist() == boards.tolist() + [0x2000000000000011]
    assert back.to_bytes("v2") == r.to_bytes("v2")


def test_v1_refuses_branches_unless_dropped(fixture_bytes):
    r = a2pack.RunV2.from_bytes(fixture_bytes)
    with pytest.raises(a2pack.InvalidArgumentError, match="branch"):
        r.to_bytes("v1")
    v1 = r.to_bytes("v1", drop_branches=True)
    assert not a2pack.RunV2.from_bytes(v1).has_branches
    with pytest.raises(ValueError):
        r.to_bytes("v3")


def test_branches_shapes_round_trip():
    meta = Meta(2, 0, 0.0, 0, 0)
    steps = [StepV2(1, 0, (0.5, None, 1.0, None)), StepV2(2, 3, None)]
    r = a2pack.RunV2(meta, steps, 3)
    assert r.steps == steps
    assert a2pack.RunV2.from_bytes(r.to_bytes()).steps == steps
    assert r.legal_masks.tolist() == [0b0101, 0]
    assert r.branch_present.tolist() == [1, 0]


def test_errors_are_typed_and_name_the_problem(fixture_bytes, tmp_path):
    with pytest.raises(a2pack.NotFoundError) as e:
        a2pack.RunV2.load(tmp_path / "missing.a2run2")
    assert isinstance(e.value, FileNotFoundError)
    assert "missing.a2run2" in str(e.value)
    assert e.value.status == -2
    with pytest.raises(a2pack.CorruptError, match="trailing"):
        a2pack.RunV2.from_bytes(fixture_bytes + b"\0")
    with pytest.raises(a2pack.CorruptError, match="offset"):
        a2pack.RunV2.from_bytes(fixture_bytes[:1000])
    v1 = bytearray(a2pack.RunV2(Meta(0, 0, 0.0, 0, 0), [], 1).to_bytes("v1"))
    v1[10] ^= 0xFF
    with pytest.raises(a2pack.ChecksumError):
        a2pack.RunV2.from_bytes(bytes(v1))
    with pytest.raises(a2pack.InvalidArgumentError, match="move"):
        a2pack.RunV2.from_arrays(Meta(1, 0, 0.0, 0, 0), [1], [9])


def test_batch_columns_are_views_that_keep_the_batch_alive(fixture_bytes):
    small = a2pack.RunV2(Meta(1, 0, 0.0, 0, 0, "e"), [StepV2(7, 2, None)], 8).to_bytes("v1")
    batch = a2pack.decode_batch([fixture_bytes, small, fixture_bytes], workers=2)
    assert len(batch) == 3 and batch.n_steps == 959 * 2 + 1
    boards = batch.boards
    del batch
    gc.collect()
    assert boards[0] == 0x0010000000000001  # memory still valid
    assert not boards.flags.writeable
    b2 = a2pack.decode_batch([fixture_bytes, small])
    assert b2.step_offsets.tolist() == [0, 959, 960]
    assert b2.branch_values.shape == (960, 4)
    assert b2.source_kind.tolist() == [2, 1]
    assert b2.engine(0) is None and b2.engine(1) == "e"
    assert b2.moves[b2.run_steps(1)].tolist() == [2]
    with pytest.raises(a2pack.CorruptError, match="payload 1"):
        a2pack.decode_batch([fixture_bytes, fixture_bytes[:-1]])


def test_board_helpers():
    b = 0x1123000000000000  # top row 2 2 4 8
    assert a2pack.board_score(b) == 20
    assert a2pack.board_highest_tile(b) == 8
    assert a2pack.board_apply_move(b, 2) == 0x2230000000000000
    assert a2pack.board_to_grid(b)[0].tolist() == [1, 1, 2, 3]
    assert a2pack.board_legal_moves(b) & 1 == 0
    out = a2pack.normalise_branches([1, 2, 3, 4], 0b1111)
    assert out[0] == 0 and out[3] == np.float32(1) - np.finfo(np.float32).eps


def test_generator_is_deterministic(tmp_path):
    a = a2pack.generate_run(11, policy="random")
    b = a2pack.generate_run(11, policy="random")
    assert a == b and len(a) > 0
    c = a2pack.generate_run(11, policy="greedy", max_steps=50)
    assert len(c) <= 50 and c.has_branches
    for jobs in (1, 2):
        a2pack.generate_dir(tmp_path / f"j{jobs}", 6, seed=3, policy="greedy", max_steps=40,
                            jobs=jobs)
    files1 = sorted((tmp_path / "j1").iterdir())
    files2 = sorted((tmp_path / "j2").iterdir())
    assert [f.name for f in files1] == [f"run-{i:06d}.a2run2" for i in range(6)]
    assert [f.read_bytes() for f in files1] == [f.read_bytes() for f in files2]


def test_generator_progress_can_stop(tmp_path):
    seen = []

    def progress(done, total):
        seen.append((done, total))
        return False

    with pytest.raises(a2pack.InterruptedError_):
        a2pack.generate_dir(tmp_path / "x", 40, policy="random", progress=progress)
    assert seen and seen[0][1] == 40


def test_load_batch_reads_files_like_decode_batch_of_their_bytes(tmp_path, fixture_file):
    paths = []
    for i in range(5):
        p = tmp_path / f"r{i}.a2run2"
        p.write_bytes(a2pack.generate_run(seed=i).to_bytes("v1" if i == 2 else "v2",
                                                             drop_branches=True))
        paths.append(p)
    paths.append(fixture_file)
    loaded = a2pack.load_batch(paths, workers=2)
    decoded = a2pack.decode_batch([p.read_bytes() for p in paths], workers=1)
    for name, col in decoded.columns().items():
        np.testing.assert_array_equal(loaded.columns()[name], col, err_msg=name)
    assert loaded.payload_bytes == sum(p.stat().st_size for p in paths)
    assert decoded.payload_bytes == loaded.payload_bytes
    assert len(a2pack.load_batch([])) == 0


def test_load_batch_names_the_bad_file(tmp_path, fixture_file):
    good = tmp_path / "good.a2run2"
    good.write_bytes(fixture_file.read_bytes())
    torn = tmp_path / "torn.a2run2"
    torn.write_bytes(fixture_file.read_bytes()[:-9])
    empty = tmp_path / "empty.a2run2"
    empty.write_bytes(b"")
    for bad, why in ((torn, "offset"), (empty, "empty run payload"),
                     (tmp_path / "missing.a2run2", "No such file")):
        with pytest.raises(a2pack.Error) as e:
            a2pack.load_batch([good, bad, good], workers=2)
        assert str(bad) in str(e.value) and why in str(e.value), str(e.value)
        assert str(good) not in str(e.value).replace(str(bad), "")
