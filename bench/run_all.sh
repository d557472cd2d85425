#!/usr/bin/env bash
# Run every benchmark program and Python comparison script; results (JSON and
# console text) go to bench-out/. Usage: bench/run_all.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
out=${BENCH_OUT:-$here/../bench-out}
mkdir -p "$out"
rm -f "$out/results.jsonl"   # bench/results.py: this run's cells only
export BENCH_OUT=$out
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  name=$(basename "$b")
  echo "=== $name"
  "$b" --benchmark_out="$out/$name.json" --benchmark_out_format=json | tee "$out/$name.txt"
done
for py in "$here"/*_compare.py; do
  [ -f "$py" ] || continue
  echo "=== $(basename "$py")"
  A2PACK_CLI="$build/a2pack" "${PYTHON:-python3}" "$py" | tee "$out/$(basename "$py" .py).txt"
done
echo "=== summary"
"${PYTHON:-python3}" "$here/summary.py" "$out"
