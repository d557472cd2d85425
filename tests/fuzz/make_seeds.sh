#!/usr/bin/env bash
# Seed inputs for the fuzz targets, made with the project's own CLI and
# Python package: real run files (the upstream fixture and generated v1/v2
# runs), packfiles, record files in each variant fuzz_bag reads, and a data
# logger segment. Usage: make_seeds.sh CLI OUT_DIR [PYTHON]
set -euo pipefail
cli=$1 out=$2 py=${3:-python3}
fixture=${A2PACK_FIXTURE:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/fixtures/example.a2run2}
rm -rf "$out" && mkdir -p "$out"/{run,pack,bag,logger,dataset,logger-streams} "$out/work"
w=$out/work

# Short games keep the inputs small (libFuzzer mutates small inputs best).
"$cli" -q gen --runs 3 --out "$w/v2" --seed 1 --format v2 --policy random --max-steps 12
"$cli" -q gen --runs 2 --out "$w/v1" --seed 2 --format v1 --policy random --max-steps 8
"$cli" -q gen --runs 2 --out "$w/ex" --seed 3 --format v2 --depth 1 --max-steps 6
for d in v2 v1 ex; do for f in "$w/$d"/*.a2run2; do cp "$f" "$out/run/$d-$(basename "$f")"; done; done
[ -f "$fixture" ] && cp "$fixture" "$out/run/fixture.a2run2"

"$cli" -q pack --input "$w/v2" --output "$out/pack/stored.a2pack" --align 8
"$cli" -q pack --input "$w/v1" --output "$out/pack/zstd.a2pack" --compress zstd --no-crc
# (the fixture among them: small runs are not worth compressing and stay stored)
"$cli" -q pack --input "$out/run" --output "$out/pack/lz4.a2pack" --compress lz4 --no-crc --align 16

# fuzz_bag: one mode byte (bit 0 zstd, bit 1 pread, bit 2 separate limits;
# then a 2-byte big-endian split) before the file bytes.
for ext in bag bagz; do
  "$cli" -q bag write "$w/t.$ext" "$w/v2"
  "$cli" -q bag write --separate "$w/s.$ext" "$w/v1"
done
for m in 0 1 2 3; do
  ext=bag; (( m & 1 )) && ext=bagz
  { printf "\\x$(printf %02x $m)"; cat "$w/t.$ext"; } > "$out/bag/tail-$m"
  recs=$(stat -c %s "$w/s.$ext")
  { printf "\\x$(printf %02x $((m | 4)))\\x$(printf %02x $((recs >> 8 & 255)))\\x$(printf %02x $((recs & 255)))";
    cat "$w/s.$ext" "$w/limits.s.$ext"; } > "$out/bag/separate-$m"
done

"$py" - "$w/log" <<'PY'
import sys
from a2pack.logger import DataLogger
with DataLogger(sys.argv[1], frame_bytes=4096) as log:
    s = log.register_stream({"name": "loss"}, epoch_scale=1.0, value_scale=0.001)
    for t in range(40):
        log.record(s, float(t), [1, 5, 9 + t % 3], [0.5, -1.25, t / 7])
PY
cp "$w"/log/segments/*.seg.zst "$out/logger/"
cp "$w"/log/streams/*.json "$out/logger-streams/"
# fuzz_dataset: a small dataset (the files the input does not replace), and
# each of its files behind the mode bytes that pick it (bit 0 manifest, bit 1
# mmap; bits 2-3: 0 steps.npy, 1 metadata.db, 2 manifest.json).
"$cli" -q dataset build --input "$w/ex" --out "$out/dataset-fixed"
for m in 0 1 2 3; do
  { printf "\\x$(printf %02x $m)"; cat "$out/dataset-fixed/steps.npy"; } > "$out/dataset/steps-$m"
done
for m in 4 5 7; do
  { printf "\\x$(printf %02x $m)"; cat "$out/dataset-fixed/metadata.db"; } > "$out/dataset/db-$m"
done
{ printf "\\x08"; cat "$out/dataset-fixed/manifest.json"; } > "$out/dataset/manifest-8"
rm -rf "$w"
