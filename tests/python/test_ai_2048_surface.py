"""ai_2048's upstream-compatible surface, on a2pack alone (no upstream tool):
the behaviours upstream's own suite checks, with packs and datasets built by
a2pack, plus the unhappy paths (types, ranges, damaged and missing files)."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import a2pack
import ai_2048 as a2

MOVES = [a2.Move.UP, a2.Move.DOWN, a2.Move.LEFT, a2.Move.RIGHT]


# -- Board and Move ---------------------------------------------------------------
def test_board_basics():
    e = a2.Board.empty()
    assert (e.raw, e.score(), e.highest_tile(), e.count_empty()) == (0, 0, 1, 16)
    assert e.is_game_over()  # no move changes an empty board
    b = a2.Board.from_raw(0x1000000000000002)
    assert b.to_values()[0][0] == 2 and b.to_values()[3][3] == 4
    assert b.to_exponents() == [1] + [0] * 14 + [2] and b.count_empty() == 14
    assert list(a2.Board.from_raw(0x4321000000000000))[:5] == [16, 8, 4, 2, 0]
    assert [b.tile_value(i) for i in (0, 1, 15)] == [2, 0, 4]
    assert a2.Board.from_raw(0x1234123412341234).highest_tile() == 16
    assert repr(e) == "Board(0x0000000000000000)" and repr(b) == "Board(0x1000000000000002)"
    assert str(a2.Board.from_raw(0x1000000000000000)).splitlines()[1] == \
        "   2   |       |       |       "
    assert a2.Board.from_raw(0x1234) == a2.Board.from_raw(0x1234) != a2.Board.from_raw(0x5678)
    assert not (b == "a board") and b != 0x1000000000000002
    assert len({a2.Board.from_raw(7), a2.Board.from_raw(7)}) == 1
    assert a2.Board.from_raw(0x123456789ABCDEF1).is_game_over()
    assert not a2.Board.from_raw(0x1100000000000000).is_game_over()
    assert a2.Board.from_raw(0x2220000000000000).score() == 12  # three 4s: 4 each


def test_shift_and_moves_use_a2packs_engine():
    b = a2.Board.from_raw(0x1000000000000000)
    for m in MOVES:
        assert b.shift(m).raw == a2pack.board_apply_move(b.raw, MOVES.index(m))
    assert b.shift(a2.Move.RIGHT).to_values()[0][3] == 2
    assert b.shift(a2.Move.DOWN).to_values()[3][0] == 2
    moved = b.make_move(a2.Move.RIGHT, rng=a2.Rng(42))
    assert moved.count_empty() == 14 and moved != b.shift(a2.Move.RIGHT)
    assert b.make_move(a2.Move.UP, seed=3) == b  # illegal: no tile is added
    assert moved == b.make_move(a2.Move.RIGHT, seed=42)  # seed= is Rng(seed)
    assert b.make_move(a2.Move.RIGHT).count_empty() == 14  # fresh random stream


def test_move_values():
    assert [repr(m) for m in MOVES] == ["Move.UP", "Move.DOWN", "Move.LEFT", "Move.RIGHT"]
    assert [str(m) for m in MOVES] == ["UP", "DOWN", "LEFT", "RIGHT"]
    assert [hash(m) for m in MOVES] == [0, 1, 2, 3]
    assert a2.Move.UP == a2.Move.UP and a2.Move.UP != a2.Move.DOWN and a2.Move.UP != 0
    with pytest.raises(TypeError):
        a2.Move()
    with pytest.raises(AttributeError):
        a2.Move.UP._v = 3


def test_rng_is_deterministic_and_clonable():
    r1, r2 = a2.Rng(123), a2.Rng(123)
    assert a2.Board.empty().with_random_tile(rng=r1) == a2.Board.empty().with_random_tile(rng=r2)
    c = r1.clone()
    assert a2.Board.empty().with_random_tile(rng=r1) == a2.Board.empty().with_random_tile(rng=c)
    rng = a2.Rng(99)
    b = a2.Board.empty().with_random_tile(rng=rng).with_random_tile(rng=rng)
    for m in MOVES:
        if b.is_game_over():
            break
        b = b.make_move(m, rng=rng)
    assert b.score() > 0 and b.count_empty() < 16


def test_board_refuses_bad_arguments():
    for bad, exc in [(-1, OverflowError), (1 << 64, OverflowError), ("0x10", TypeError),
                     (1.5, TypeError)]:
        with pytest.raises(exc):
            a2.Board.from_raw(bad)
    assert a2.Board.from_raw(np.uint64(5)).raw == 5  # anything with __index__
    b = a2.Board.from_raw(0x1100000000000000)
    with pytest.raises(TypeError):
        b.shift(2)  # moves are Move objects, as upstream's
    with pytest.raises(TypeError):
        b.make_move(a2.Move.UP, rng=42)
    with pytest.raises(IndexError, match="16"):
        b.tile_value(16)
    with pytest.raises(OverflowError):
        b.tile_value(-1)
    with pytest.raises(ValueError, match="full"):  # upstream panics here
        a2.Board.from_raw(0x123456789ABCDEF1).with_random_tile(seed=1)
    with pytest.raises(TypeError):
        a2.Board()
    with pytest.raises(AttributeError):
        b.raw = 3


# -- Expectimax -------------------------------------------------------------------
def test_expectimax_best_move_stats_and_config():
    ex = a2.Expectimax()
    assert ex.best_move(a2.Board.from_raw(0x1100000000000000)) == a2.Move.DOWN
    ex.best_move(a2.Board.from_raw(0x1234000000000000))
    s = ex.last_stats()
    assert s.nodes > 0 and s.peak_nodes >= s.nodes
    ex.reset_stats()
    assert (ex.last_stats().nodes, ex.last_stats().peak_nodes) == (0, 0)
    over = a2.Board.from_raw(0x123456789ABCDEF1)
    assert ex.best_move(over) is None and ex.state_value(over) == 0.0
    assert [(e.is_legal, e.expected_value) for e in ex.branch_evals(over)] == [(False, 0.0)] * 4
    cfg = a2.ExpectimaxConfig()
    assert (cfg.prob_cutoff, cfg.depth_cap, cfg.cache_enabled) == (np.float32(1e-4), None, True)
    cfg.depth_cap, cfg.cache_enabled = 1, False
    shallow = a2.Expectimax(cfg)
    b = a2.Board.empty().with_random_tile(seed=1).with_random_tile(seed=2)
    shallow.branch_evals(b)
    deep = a2.Expectimax()
    deep.branch_evals(b)
    assert shallow.last_stats().nodes < deep.last_stats().nodes
    with pytest.raises(TypeError):
        a2.Expectimax("config")
    with pytest.raises(TypeError):
        ex.best_move(0x1100000000000000)


def test_branch_evals_and_normalisation():
    b = a2.Board.empty().with_random_tile(seed=1).with_random_tile(seed=2)
    ex = a2.Expectimax()
    evs = ex.branch_evals(b)
    assert [e.direction for e in evs] == MOVES
    legal = [e for e in evs if e.is_legal]
    assert legal and max(e.expected_value for e in legal) == ex.state_value(b)
    norm = a2.normalize_branches_py(evs)
    assert len(norm) == 4 and any(br.is_legal for br in norm)
    assert all(0.0 <= br.value < 1.0 for br in norm if br.is_legal)
    with pytest.raises(ValueError, match="expected 4"):
        a2.normalize_branches_py(evs[:3])
    with pytest.raises(TypeError):
        a2.normalize_branches_py([1, 2, 3, 4])
    with pytest.raises(TypeError):
        a2.BranchEval()


# -- Runs ------------------------------------------------------------------------
def _run(steps, base, branches=False):
    meta = a2.Meta(steps, 1_700_000_000, 1.0, 1000, 128, None)
    bs = [a2.BranchV2.legal(1.0), a2.BranchV2.legal(0.5), a2.BranchV2.legal(0.25),
          a2.BranchV2.illegal()]
    return a2.RunV2(meta, [a2.StepV2(base + i, MOVES[0] if branches else MOVES[i % 4],
                                     bs if branches else None) for i in range(steps)], base + steps)


def test_run_fields_types_and_roundtrip(tmp_path, fixture_file):
    run = a2.RunV2.load(fixture_file)
    assert run.meta.steps > 0 and isinstance(run.final_board, a2.Board)
    assert run.final_board.highest_tile() >= 2048 and run.final_board.raw == run.final_board_raw
    assert run.to_bytes() == fixture_file.read_bytes()  # upstream's bytes, unchanged
    run.save(tmp_path / "rt.a2run2")
    again = a2.RunV2.load(str(tmp_path / "rt.a2run2"))
    assert (again.meta.steps, again.final_board_raw) == (run.meta.steps, run.final_board_raw)
    s0 = run.steps[0]
    assert isinstance(s0.chosen, a2.Move) and isinstance(s0.pre_board, a2.Board)
    m = a2.Meta(3, 5, 1.1, 7, 64)
    assert (m.steps, m.start_unix_s, m.elapsed_s, m.max_score, m.highest_tile, m.engine_str) == \
        (3, 5, float(np.float32(1.1)), 7, 64, None)
    r = _run(3, 0x1000, branches=True)
    assert [b.value for b in r.steps[0].branches] == [1.0, 0.5, 0.25, None]
    assert a2.RunV2.from_bytes(r.to_bytes()).to_bytes() == r.to_bytes()
    short = a2.StepV2(1, a2.Move.LEFT, [a2.BranchV2.legal(0.1)])  # padded with illegal ones
    assert [b.is_legal for b in short.branches] == [True, False, False, False]
    assert short.branches[0].value == float(np.float32(0.1))
    assert repr(short.branches[0]) == "BranchV2.legal(0.100000)"


def test_run_errors_are_runtime_errors(tmp_path):
    with pytest.raises(RuntimeError, match="serialization error: .*missing") as e:
        a2.RunV2.load(tmp_path / "missing.a2run2")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, a2pack.Error)
    data = _run(3, 0x1000).to_bytes()
    with pytest.raises(RuntimeError, match="serialization error"):
        a2.RunV2.from_bytes(data[:-3])
    with pytest.raises(TypeError):
        a2.RunV2.from_bytes(bytearray(data))
    with pytest.raises(TypeError):
        a2.RunV2(a2.Meta(1, 0, 0, 0, 0), [7], 0)
    with pytest.raises(OverflowError):
        a2.Meta(1 << 32, 0, 0.0, 0, 0)
    with pytest.raises(TypeError):
        a2.StepV2(1, 0)


# -- Packs -----------------------------------------------------------------------
@pytest.fixture
def pack(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for name, r in [("r1", _run(3, 0x1000)), ("r2", _run(2, 0x2000)), ("r3", _run(4, 0x3000))]:
        (runs / f"{name}.a2run2").write_bytes(r.to_bytes())
    a2pack.pack_dir(runs, tmp_path / "dataset.a2pack")
    return tmp_path / "dataset.a2pack"


def test_pack_reader(pack, tmp_path):
    r = a2.PackReader.open(pack)
    assert len(r) == 3 and r.kind(0) == "v2"
    s = r.stats
    assert (s.count, s.total_steps, s.min_len, s.max_len, s.mean_len) == (3, 9, 2, 4, 3.0)
    assert isinstance(r.decode(0), a2.RunV2) and r.decode(0).meta.steps == 3
    assert [x.meta.steps for x in r.iter()] == [3, 2, 4]
    assert [x.meta.steps for x in r.iter_indices([2, 0])] == [4, 3]
    assert [x.meta.steps for x in r.decode_batch([1, 2])] == [2, 4]
    assert [[x.meta.steps for x in b] for b in r.iter_batches(batch_size=2)] == [[3, 2], [4]]
    s1 = [x.meta.steps for b in r.iter_batches(3, shuffle=True, seed=123) for x in b]
    assert s1 == [x.meta.steps for b in r.iter_batches(3, shuffle=True, seed=123) for x in b]
    assert sorted(s1) == [2, 3, 4]
    r.to_jsonl(tmp_path / "runs.jsonl", parallel=False)
    r.to_jsonl(tmp_path / "steps.jsonl", by_step=True, progress=False)
    assert (tmp_path / "runs.jsonl").read_text().count("\n") == 3
    steps = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 9 and steps[0]["step_idx"] == 0 and len(steps[0]["pre_board"]) == 16
    assert isinstance(r.a2pack, a2pack.PackReader)


def test_step_batches(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    _run(3, 0x1000_0000_0000_0000, branches=True).save(runs / "r1.a2run2")
    _run(2, 0x2000_0000_0000_0000, branches=True).save(runs / "r2.a2run2")
    _run(2, 0x3000_0000_0000_0000).save(runs / "r3.a2run2")  # no branches stored
    a2pack.pack_dir(runs, tmp_path / "p.a2pack")
    r = a2.PackReader.open(tmp_path / "p.a2pack")
    batches = list(r.iter_step_batches(batch_size=3))
    assert [len(d) for _, d, _ in batches] == [3, 3, 1]
    pre = [p for b in batches for p in b[0]]
    assert pre[0] == a2.Board.from_raw(0x1000_0000_0000_0000).to_exponents()
    assert [p[:2] for p in pre] == [[1, 0]] * 3 + [[2, 0]] * 2 + [[3, 0]] * 2
    dirs = [d for b in batches for d in b[1]]
    assert dirs == [0] * 5 + [0, 1]
    brs = [br for b in batches for br in b[2]]
    for row in brs[:5]:
        assert [(x.is_legal, x.value) for x in row] == [(True, 1.0), (True, 0.5), (True, 0.25),
                                                      (False, None)]
    # A step without branches gets Legal(1.0) for its move, illegal elsewhere.
    assert [(x.is_legal, x.value) for x in brs[6]] == [(False, None), (True, 1.0), (False, None),
                                                      (False, None)]
    a = [d for _, d, _ in r.iter_step_batches(10, shuffle=True, seed=42) for d in d]
    assert a == [d for _, d, _ in r.iter_step_batches(10, shuffle=True, seed=42) for d in d]
    assert sorted(a) == sorted(dirs)
    train, test = r.split(test_size=1, seed=3)
    assert len(train) + len(test) == 3 and not set(train.indices()) & set(test.indices())
    assert sum(len(d) for _, d, _ in test.iter_step_batches(4, shuffle=True)) == \
        sum(x.meta.steps for x in test.iter())
    with pytest.raises(ValueError):
        r.split(test_pct=1.5)
    with pytest.raises(ValueError):
        list(r.iter_step_batches(0))


def test_pack_errors_are_runtime_errors(pack, tmp_path):
    with pytest.raises(RuntimeError, match="pack error: .*nope") as e:
        a2.PackReader.open(tmp_path / "nope.a2pack")
    assert isinstance(e.value, FileNotFoundError)
    damaged = tmp_path / "damaged.a2pack"
    damaged.write_bytes(pack.read_bytes()[:-10])
    with pytest.raises(RuntimeError, match="pack error"):
        a2.PackReader.open(damaged)
    r = a2.PackReader.open(pack)
    with pytest.raises(RuntimeError, match="pack error: .*3") as e:
        r.decode(3)
    assert isinstance(e.value, IndexError)
    with pytest.raises(TypeError):
        a2.PackReader(pack)


# -- Step arrays -----------------------------------------------------------------
def test_batch_from_steps_on_an_a2pack_dataset(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    _run(3, 0x1000, branches=True).save(runs / "r1.a2run2")
    _run(2, 0x2000, branches=True).save(runs / "r2.a2run2")
    a2pack.build_dataset(runs, tmp_path / "ds")
    steps = np.load(tmp_path / "ds" / "steps.npy")
    idxs = np.array([4, 0, 2])
    exps_buf, dirs, evs = a2.batch_from_steps(steps, idxs, parallel=True)
    exps = np.frombuffer(exps_buf, dtype=np.uint8).reshape(-1, 16)
    want = [a2.Board.from_raw(int(b)).to_exponents() for b in steps["board"][idxs]]
    assert exps.tolist() == want and isinstance(exps_buf, bytearray)
    assert dirs.tolist() == steps["move"][idxs].tolist() and evs.shape == (3, 4)
    assert a2.exps_from_boards(np.array([], dtype=np.uint64)) == bytearray()
    with pytest.raises(BufferError):
        a2.exps_from_boards(np.array([1, 2], dtype=np.int32))
    with pytest.raises(TypeError):
        a2.exps_from_boards(np.zeros((2, 2), dtype=np.uint64))
    with pytest.raises(TypeError):
        a2.exps_from_boards([1, 2])


def test_import_is_lazy():
    """`import ai_2048` loads neither a2pack, cffi nor numpy (upstream's
    module imports in a few tens of milliseconds)."""
    code = ("import sys, ai_2048; "
            "print(sorted(m for m in ('a2pack', 'cffi', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
