#!/usr/bin/env bash
# Session 23, after s23_c.sh: the wave model ranks only whole-swizzle-atom tile widths (multiples of
# 64) for an N-contiguous B, and costs workspace split-K as the workspace (not the serial turnstile).
# benchmarks/shapes-online.json (issue 21's classes) and benchmarks/shapes-fitted.json tuned at 16
# trials into one fresh database (OUT/tuned.sqlite), winners against torch.matmul in the finals. 5 files.
#   bash benchmarks/device/s23_d.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db="$out/tuned.sqlite"
for f in online fitted; do
  timeout 200 python -m autocutlass.cli tune --shapes "benchmarks/shapes-$f.json" --trials 16 --db "$db" \
      --json "$out/tune-$f.json" >"$out/tune-$f.txt" 2>>"$out/log.txt"
  stamp "tune $f: rc $?"; tail -13 "$out/tune-$f.txt" >&2
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm" "$out/log.txt"
