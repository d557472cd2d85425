#!/usr/bin/env bash
# Run every fuzz target for a while on seeds made fresh, the inputs that once
# found bugs (regressions/<target>/, fixed since), and the corpus kept from
# earlier runs. Inputs that crash or trip a sanitizer are kept in
# FUZZ_BUILD/fuzz-crashes/<target>/ and fail the run.
# SECONDS_PER_TARGET 0 replays the seeds and regressions once, without
# mutating (deterministic: what CI runs).
# Usage: run.sh FUZZ_BUILD CLI SECONDS_PER_TARGET [PYTHON]
set -euo pipefail
build=$1 cli=$2 seconds=$3 py=${4:-python3}
here=$(cd "$(dirname "$0")" && pwd)
seeds=$build/fuzz-seeds
bash "$here/make_seeds.sh" "$cli" "$seeds" "$py" > /dev/null
export A2PACK_FUZZ_LOGGER_SIDECAR=$(ls "$seeds"/logger-streams/*.json | head -1)
export A2PACK_FUZZ_DATASET=$seeds/dataset-fixed
failed=0
for t in run pack bag logger dataset; do
  corpus=$build/fuzz-corpus/$t crashes=$build/fuzz-crashes/$t
  mkdir -p "$corpus" "$crashes"
  if [ "$seconds" = 0 ]; then
    how=(-runs=0); echo "fuzz_$t: replaying seeds and regressions"
  else
    how=(-max_total_time="$seconds"); echo "fuzz_$t: ${seconds}s"
  fi
  if ! "$build/tests/fuzz/fuzz_$t" "${how[@]}" -max_len=65536 -timeout=20 \
      -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$crashes/" \
      "$corpus" "$seeds/$t" $( [ -d "$here/regressions/$t" ] && echo "$here/regressions/$t" ) \
      > "$build/fuzz-$t.log" 2>&1; then
    echo "fuzz_$t FAILED: see $build/fuzz-$t.log and $crashes/"
    tail -40 "$build/fuzz-$t.log"
    failed=1
  else
    grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$build/fuzz-$t.log" | tr '\n' ' '
    echo
  fi
done
exit $failed
