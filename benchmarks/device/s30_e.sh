#!/usr/bin/env bash
# Session 30, an H100: the few-tile layers that read below cuDNN after 12 trials (call b) tuned again with 32 into a
# fresh database from the priors (call b's records first); merged on the machine into the shipped H100 file (the
# faster record of each problem stays); the few-tile file against cuDNN as a user gets that file.
#   bash benchmarks/device/s30_e.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$k/tuned.sqlite
few=benchmarks/shapes-conv-fewtiles.json
for name in rn50-l4-3x3-b8/fprop sd-1280@16-b1/fprop sd-640@32-b1/fprop rn50-l3-3x3-b8/fprop; do
  timeout 75 python -m autocutlass.cli tune --shapes $few --only "$name" --trials 32 --family hopper_conv --db "$db" \
    --json "$k/tune-${name//[\/@]/_}.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
case "$gpu" in *H200*) ship=tuning_dbs/NVIDIA-H200.sqlite ;; *) ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite ;; esac
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 60 python -m autocutlass.cli bench --shapes $few --only "*/fprop" --policy cached --no-first-call --rounds 5 \
  --out "$k/bench-fewtiles" >"$k/bench-fewtiles.txt" 2>>"$k/log.txt"
stamp "bench fewtiles: rc $? $(grep geomean "$k/bench-fewtiles.txt" | cut -c1-150)"
(cd "$out" && tar czf s30e.tar.gz keep/ && rm -rf user.sqlite*)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
grep -v "^hit-path" "$k/bench-fewtiles.txt" | cut -c1-150
