"""ai_2048 (a2pack) against values the upstream ai-2048 tool itself returned.

ai_2048_reference/reference.json holds what upstream's PyO3 module gave for
seeded spawns and moves, expectimax branch values on boards from real games
(four configurations), normalised branches, and shuffled orders of a pack
whose pre boards encode (run, step); make_reference.py regenerates it.
Everything is compared exactly: floats included.
"""

import json
import pathlib

import pytest

import a2pack
import ai_2048 as a2

REF = json.loads((pathlib.Path(__file__).parent / "ai_2048_reference" / "reference.json").read_text())
MOVES = [a2.Move.UP, a2.Move.DOWN, a2.Move.LEFT, a2.Move.RIGHT]


def test_seeded_spawns_and_moves_are_upstreams():
    for case in REF["spawn"]:
        rng = a2.Rng(case["seed"])
        b = a2.Board.empty()
        got = []
        for k in range(len(case["boards"])):
            b = b.with_random_tile(rng=rng) if k < 3 else \
                b.make_move(MOVES[(case["seed"] + k) % 4], rng=rng)
            got.append(b.raw)
        assert got == case["boards"], case["seed"]
    assert [a2.Board.empty().with_random_tile(seed=s).with_random_tile(seed=s + 1).raw
            for s in range(20)] == REF["spawn_seed_kw"]


@pytest.mark.parametrize("name,cfg", [
    ("default", {}), ("depth_cap_2", {"depth_cap": 2}), ("no_cache", {"cache_enabled": False}),
    ("prob_cutoff_0.01", {"prob_cutoff": 0.01})])
def test_expectimax_values_are_upstreams_bit_for_bit(name, cfg):
    config = a2.ExpectimaxConfig()
    for k, v in cfg.items():
        setattr(config, k, v)
    ex = a2.Expectimax(config)
    for want in REF["search"][name]:
        b = a2.Board.from_raw(want["board"])
        evs = ex.branch_evals(b)
        assert [e.expected_value for e in evs] == want["ev"], hex(want["board"])
        assert [e.is_legal for e in evs] == want["legal"]
        assert [e.direction for e in evs] == MOVES
        assert ex.last_stats().nodes == want["nodes"]
        best = ex.best_move(b)
        assert (None if best is None else MOVES.index(best)) == want["best_move"]
        assert ex.state_value(b) == want["state_value"]
        assert [br.value for br in a2.normalize_branches_py(evs)] == want["normalized"]


@pytest.fixture(scope="module")
def shuffle_pack(tmp_path_factory):
    """The reference's pack, rebuilt with a2pack's own writer."""
    tmp = tmp_path_factory.mktemp("shuffle")
    runs = tmp / "runs"
    runs.mkdir()
    for r, n in enumerate(REF["run_steps"]):
        steps = [a2.StepV2(((r + 1) << 40) | s, MOVES[(r + s) % 4],
                           [a2.BranchV2.legal(0.25 * ((r + s + k) % 5)) for k in range(4)]
                           if r % 2 else None) for s in range(n)]
        meta = a2.Meta(n, 1_700_000_000 + r, 1.0, 100 * r, 64, None)
        a2.RunV2(meta, steps, r).save(runs / f"run-{r:02d}.a2run2")
    pack = tmp / "p.a2pack"
    a2pack.pack_dir(runs, pack)
    reader = a2.PackReader.open(pack)
    assert [run.final_board_raw for run in reader.iter()] == REF["pack_order"]
    return reader


def test_run_shuffles_are_upstreams(shuffle_pack):
    for seed, want in REF["iter_batches"].items():
        got = [run.final_board_raw for b in shuffle_pack.iter_batches(3, shuffle=True, seed=int(seed))
               for run in b]
        assert got == want, seed
    assert [run.final_board_raw for b in shuffle_pack.iter_batches(3, shuffle=True)
            for run in b] == REF["iter_batches_default_seed"]


def test_step_batches_are_upstreams(shuffle_pack):
    for seed, want in REF["step_batches"].items():
        rows = []
        for pre, dirs, brs in shuffle_pack.iter_step_batches(16, shuffle=True, seed=int(seed)):
            for p, d, br in zip(pre, dirs, brs):
                b = int("".join(f"{e:x}" for e in p), 16)
                rows.append([b >> 40, b & 0xFFFFFFFFFF, d, [x.value for x in br]])
        assert rows == want, seed
    assert [len(d) for _, d, _ in shuffle_pack.iter_step_batches(16)] == \
        REF["step_batches_plain_sizes"]


def test_splits_and_stats_are_upstreams(shuffle_pack):
    for kw, want in zip(REF["split_kwargs"], REF["split"]):
        assert [v.indices() for v in shuffle_pack.split(**kw)] == want, kw
    s = shuffle_pack.stats
    assert [s.count, s.total_steps, s.min_len, s.max_len, s.mean_len, s.p50, s.p90, s.p99] == \
        REF["stats"]
