#!/usr/bin/env bash
# Generate runs with the default expectimax policy, inspect one, decode all.
set -euo pipefail
"$A2PACK" gen --runs 200 --out "$DEMO_DIR/runs" --seed 2048
first=$(ls "$DEMO_DIR/runs" | head -1)
"$A2PACK" inspect --run "$DEMO_DIR/runs/$first"
"$A2PACK" decode --input "$DEMO_DIR/runs"
