#!/usr/bin/env bash
# Runs → a .bagz record file (one zstd frame per run, bagz/Säckli format),
# info, a random batch read back in Python, and back to run files byte for byte.
set -euo pipefail
bagz="$DEMO_DIR/runs.bagz"
"$A2PACK" bag convert "$DEMO_DIR/runs" "$bagz"
"$A2PACK" bag info "$bagz"
"$PYTHON" - "$bagz" "$DEMO_DIR/runs" <<'PY'
import os, sys
import numpy as np
from a2pack import bag
from a2pack.run import RunV2

path, runs_dir = sys.argv[1], sys.argv[2]
r = bag.Reader(path, bag.Reader.Options(access_pattern=bag.AccessPattern.RANDOM))
idx = np.random.default_rng(0).integers(0, len(r), size=min(32, len(r)))
batch = r.read_indices(idx)
names = sorted(os.listdir(runs_dir))
same = all(b == open(os.path.join(runs_dir, names[i]), "rb").read() for i, b in zip(idx.tolist(), batch))
steps = [len(RunV2.from_bytes(b).moves) for b in batch]
print(f"{len(r)} records, {r.approximate_bytes_per_record():.0f} stored bytes/record; "
      f"random batch of {len(batch)} runs, {sum(steps)} steps, identical to the run files: {same}")
assert same
PY
"$A2PACK" bag convert "$bagz" "$DEMO_DIR/runs-from-bag"
diff -r "$DEMO_DIR/runs" "$DEMO_DIR/runs-from-bag" && echo "runs → .bagz → runs: byte-exact"
rm -rf "$DEMO_DIR/runs-from-bag"
