#!/usr/bin/env bash
# The main job end to end on generated data. Each capability adds a step in
# scripts/demo.d/NN-name.sh, run in order with A2PACK (the CLI), PYTHON and
# DEMO_DIR (a scratch folder) set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export A2PACK=${A2PACK:-$here/../build/a2pack}
export PYTHON=${PYTHON:-python3}
export DEMO_DIR=${DEMO_DIR:-$(cd "$here/.." && pwd)/demo-out}
rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
for step in "$here"/demo.d/*.sh; do
  echo
  echo "=== $(basename "$step" .sh)"
  bash "$step"
done
echo
echo "demo finished; outputs in $DEMO_DIR"
