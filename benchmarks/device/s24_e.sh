#!/usr/bin/env bash
# Session 24, call 5 (asked for an H200, ran on an H100; call 6 ran it with needs_h200): issue 21's class shapes on the H200 with this session's GEMM seeds
# (split picks of the three cheapest split tile shapes, in 2-CTA clusters and alone):
# benchmarks/shapes-online.json, shapes-longk.json and shapes-tall.json tuned at 16 trials into a
# fresh database (OUT/tuned.sqlite, to merge into the shipped file of the GPU it ran on);
# FITTED=1 adds shapes-fitted.json.
#   bash benchmarks/device/s24_e.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
db="$out/tuned.sqlite"
for f in online longk tall ${FITTED:+fitted}; do
  timeout 200 python -m autocutlass.cli tune --shapes "benchmarks/shapes-$f.json" --trials 16 --db "$db" \
      --json "$out/tune-$f.json" 2>>"$out/log.txt" | tail -13 >&2
  stamp "tune $f done"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
