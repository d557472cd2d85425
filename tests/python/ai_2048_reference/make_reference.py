"""Regenerate reference.json from the upstream ai-2048 tool (not a2pack).

Run with upstream's own PyO3 module first on sys.path and its packer:

    PYTHONPATH=/path/to/upstream-module python make_reference.py \
        --a2pack-bin /path/to/ai-2048/target/release/a2pack --out reference.json

(`a2pack` there is the upstream tool's packer binary, cargo's
`-p ai-2048 --bin a2pack`, at a commit that still has packfiles, 8c4fc7d.)
Every value in the JSON is what upstream's module returned; a2pack's tests
(test_ai_2048_reference.py) rebuild the same inputs and compare.
"""

import argparse
import json
import pathlib
import subprocess
import tempfile

import ai_2048 as a2

MOVES = [a2.Move.UP, a2.Move.DOWN, a2.Move.LEFT, a2.Move.RIGHT]
# Runs of the shuffle pack: pre boards encode (run, step), so orders can be read back.
RUN_STEPS = [3, 40, 7, 25, 1, 60, 12]
SEEDS = [0, 1, 2, 7, 42, 123, 2**63 + 5]


def board_of(exps):
    b = 0
    for e in exps:
        b = (b << 4) | e
    return b


def game_boards(seed, moves_played):
    """Boards reached by upstream's expectimax playing from a seeded start."""
    ex = a2.Expectimax()
    rng = a2.Rng(seed)
    b = a2.Board.empty().with_random_tile(rng=rng).with_random_tile(rng=rng)
    for _ in range(moves_played):
        m = ex.best_move(b)
        if m is None:
            break
        b = b.make_move(m, rng=rng)
    return b


def search(cfg_kw, boards):
    cfg = a2.ExpectimaxConfig()
    for k, v in cfg_kw.items():
        setattr(cfg, k, v)
    ex = a2.Expectimax(cfg)
    out = []
    for raw in boards:
        b = a2.Board.from_raw(raw)
        evs = ex.branch_evals(b)
        nodes = ex.last_stats().nodes
        best = ex.best_move(b)
        out.append({
            "board": raw,
            "ev": [e.expected_value for e in evs],
            "legal": [e.is_legal for e in evs],
            "nodes": nodes,
            "best_move": None if best is None else MOVES.index(best),
            "state_value": ex.state_value(b),
            "normalized": [br.value for br in a2.normalize_branches_py(evs)],
        })
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a2pack-bin", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ref = {"_source": "values returned by the upstream ai-2048 tool's PyO3 module; "
                      "regenerate with make_reference.py (see its docstring)"}

    # Spawns and moves from seeded random streams.
    ref["spawn"] = []
    for seed in SEEDS:
        rng = a2.Rng(seed)
        b = a2.Board.empty()
        seq = []
        for k in range(40):
            if b.count_empty() == 0:
                break
            b = b.with_random_tile(rng=rng) if k < 3 else b.make_move(MOVES[(seed + k) % 4], rng=rng)
            seq.append(b.raw)
        ref["spawn"].append({"seed": seed, "boards": seq})
    ref["spawn_seed_kw"] = [a2.Board.empty().with_random_tile(seed=s).with_random_tile(seed=s + 1).raw
                            for s in range(20)]

    # Expectimax on boards from real games, with several configurations.
    boards = [game_boards(1000 + s, 25 * s).raw for s in range(12)]
    boards += [0x1100000000000000, 0x1234000000000000, 0x123456789abcdef1]
    ref["search_boards"] = boards
    ref["search"] = {
        "default": search({}, boards),
        "depth_cap_2": search({"depth_cap": 2}, boards),
        "no_cache": search({"cache_enabled": False}, boards[:6]),
        "prob_cutoff_0.01": search({"prob_cutoff": 0.01}, boards),
    }

    # Shuffle orders: a pack of runs whose pre boards are (run + 1) << 40 | step.
    with tempfile.TemporaryDirectory() as tmp:
        runs = pathlib.Path(tmp, "runs")
        runs.mkdir()
        for r, n in enumerate(RUN_STEPS):
            steps = [a2.StepV2(((r + 1) << 40) | s, MOVES[(r + s) % 4],
                               [a2.BranchV2.legal(0.25 * ((r + s + k) % 5)) for k in range(4)]
                               if r % 2 else None) for s in range(n)]
            meta = a2.Meta(n, 1_700_000_000 + r, 1.0, 100 * r, 64, None)
            (runs / f"run-{r:02d}.a2run2").write_bytes(a2.RunV2(meta, steps, r).to_bytes())
        pack = pathlib.Path(tmp, "p.a2pack")
        subprocess.run([args.a2pack_bin, "pack", "--input", str(runs), "--output", str(pack)],
                       check=True, capture_output=True)
        reader = a2.PackReader.open(pack)
        # Pack order as upstream's packer sorted the files: final_board_raw = run number.
        ref["pack_order"] = [run.final_board_raw for run in reader.iter()]
        ref["run_steps"] = RUN_STEPS
        ref["iter_batches"] = {str(s): [run.final_board_raw for b in
                                        reader.iter_batches(3, shuffle=True, seed=s) for run in b]
                               for s in SEEDS}
        ref["iter_batches_default_seed"] = [run.final_board_raw for b in
                                            reader.iter_batches(3, shuffle=True) for run in b]
        ref["step_batches"] = {}
        for s in SEEDS[:4]:
            rows = []
            for pre, dirs, brs in reader.iter_step_batches(16, shuffle=True, seed=s):
                for p, d, br in zip(pre, dirs, brs):
                    b = board_of(p)
                    rows.append([b >> 40, b & 0xFFFFFFFFFF, d, [x.value for x in br]])
            ref["step_batches"][str(s)] = rows
        ref["step_batches_plain_sizes"] = [len(d) for _, d, _ in reader.iter_step_batches(16)]
        ref["split"] = [[v.indices() for v in reader.split(**kw)] for kw in (
            {"test_pct": 0.3, "seed": 1}, {"test_size": 2, "seed": 9},
            {"unit": "step", "test_pct": 0.25, "seed": 4}, {"unit": "step", "test_size": 50, "seed": 2},
            {"test_pct": 0.2, "order": "sequential"})]
        ref["split_kwargs"] = [{"test_pct": 0.3, "seed": 1}, {"test_size": 2, "seed": 9},
                               {"unit": "step", "test_pct": 0.25, "seed": 4},
                               {"unit": "step", "test_size": 50, "seed": 2},
                               {"test_pct": 0.2, "order": "sequential"}]
        st = reader.stats
        ref["stats"] = [st.count, st.total_steps, st.min_len, st.max_len, st.mean_len, st.p50, st.p90,
                        st.p99]
    pathlib.Path(args.out).write_text(json.dumps(ref, indent=None, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
