#!/usr/bin/env bash
# Session 33, call g (H100): rn50-l4-3x3-b8's forward tuned again (16 trials from the priors, into a fresh
# database): call d's tuning timed its narrow seed (128x64 in a 1x2 cluster, 4 slabs) once at 171.8 us, a one-off
# (call c's grid: 14.7 us), and the merge kept a slower record; merged into the shipped H100 file (the faster
# record stays), then that layer against cuDNN as a user gets the file.
#   bash benchmarks/device/s33_g.sh OUT    (about 2 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$k/tuned.sqlite
few=benchmarks/shapes-conv-fewtiles.json
ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
timeout 60 python -m autocutlass.cli tune --shapes $few --only rn50-l4-3x3-b8/fprop --trials 16 --family hopper_conv \
  --db "$db" --json "$k/tune.json" >"$k/tune.txt" 2>>"$k/log.txt"
stamp "tune: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 60 python -m autocutlass.cli bench --shapes $few --only rn50-l4-3x3-b8/fprop --only rn50-l3-3x3-b8/fprop \
  --policy cached --no-first-call --rounds 7 --out "$k/bench" >"$k/bench.txt" 2>>"$k/log.txt"
stamp "bench: rc $?"
rm -f "$out"/user.sqlite*
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
grep -v "^hit-path" "$k/bench.txt" | cut -c1-150
python - "$db" <<'PY'
import sqlite3, sys
for cfg, ms in sqlite3.connect(sys.argv[1]).execute("select config, median_ms*1000 from trials order by median_ms"):
    print(f"{ms:8.2f} {cfg}")
PY
