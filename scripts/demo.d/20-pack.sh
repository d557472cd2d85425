#!/usr/bin/env bash
# Pack the generated runs into one packfile, check it, print its statistics,
# export it as JSONL in both of upstream's schemas, and read it from Python.
set -euo pipefail
pack="$DEMO_DIR/runs.a2pack"
"$A2PACK" pack --input "$DEMO_DIR/runs" --output "$pack"
"$A2PACK" validate --packfile "$pack" --full
"$A2PACK" stats --packfile "$pack"
"$A2PACK" to-jsonl --packfile "$pack" --output "$DEMO_DIR/runs.jsonl" --runs
"$A2PACK" to-jsonl --packfile "$pack" --output "$DEMO_DIR/steps.jsonl" --steps
"$A2PACK" pack --input "$DEMO_DIR/runs" --output "$DEMO_DIR/runs-zstd.a2pack" --compress zstd
ls -l "$pack" "$DEMO_DIR/runs-zstd.a2pack" "$DEMO_DIR/runs.jsonl" "$DEMO_DIR/steps.jsonl"
"$A2PACK" inspect --packfile "$pack" --index 0
"$PYTHON" - "$pack" <<'PY'
import sys, time
import a2pack
r = a2pack.PackReader.open(sys.argv[1])
t = time.perf_counter()
steps = sum(b.n_steps for b in r.iter_batches(64, shuffle=True, seed=1, columns=True))
dt = time.perf_counter() - t
print(f"python: {len(r)} runs, {steps} steps in shuffled batches of 64: "
      f"{steps / dt / 1e6:.1f} M steps/s; stats: {r.stats}")
PY
