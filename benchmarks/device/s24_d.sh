#!/usr/bin/env bash
# Session 24, call 4 (an H100): the wave model's split picks for few-tile, long-K GEMMs now span
# the three cheapest split tile shapes, each in 2-CTA clusters and alone (CPU-tested only):
# benchmarks/shapes-online.json and shapes-longk.json tuned at 16 trials into a fresh database
# (OUT/tuned.sqlite), then shapes-longk.json at 64 trials into another (OUT/tuned64.sqlite: how far
# a longer search gets).
#   bash benchmarks/device/s24_d.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
tune() {  # shapes trials db json
  timeout 300 python -m autocutlass.cli tune --shapes "benchmarks/shapes-$1.json" --trials "$2" --db "$3" \
      --json "$4" 2>>"$out/log.txt" | tail -13 >&2
  stamp "tune $1 at $2 trials done"
}
tune online 16 "$out/tuned.sqlite" "$out/tune-online.json"
tune longk 16 "$out/tuned.sqlite" "$out/tune-longk.json"
tune longk 64 "$out/tuned64.sqlite" "$out/tune-longk-64.json"
for db in "$out/tuned.sqlite" "$out/tuned64.sqlite"; do
  python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
  rm -f "$db-wal" "$db-shm"
done
