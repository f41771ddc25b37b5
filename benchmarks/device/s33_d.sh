#!/usr/bin/env bash
# Session 33, calls d (H100) and e (H200): the few-tile file with the narrow workspace-split seeds
# (hopper_conv.narrow_split_seeds). 1. the few-tile file's forward against cuDNN as a user gets the shipped file
# (before); 2. its 9 layers tuned again, 12 trials each from the priors (the shipped record first, then the seeds),
# into a fresh database; 3. merged on the machine into the shipped file (the faster record of each problem stays);
# 4. the same bench again (after).
#   bash benchmarks/device/s33_d.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$k/tuned.sqlite
few=benchmarks/shapes-conv-fewtiles.json
case "$gpu" in *H200*) ship=tuning_dbs/NVIDIA-H200.sqlite ;; *) ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite ;; esac
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 70 python -m autocutlass.cli bench --shapes $few --only "*/fprop" --policy cached --no-first-call --rounds 5 \
  --out "$k/bench-fewtiles-before" >"$k/bench-fewtiles-before.txt" 2>>"$k/log.txt"
stamp "bench before: rc $? $(grep geomean "$k/bench-fewtiles-before.txt" | cut -c1-150)"
for name in sd-1280@8-b2 sd-1280@16-b2 sd-640@32-b2 sd-320@64-b2 sd-1280@8-b1 sd-1280@16-b1 sd-640@32-b1 rn50-l4-3x3-b8 rn50-l3-3x3-b8; do
  timeout 50 python -m autocutlass.cli tune --shapes $few --only "$name/fprop" --trials 12 --family hopper_conv --db "$db" \
    --json "$k/tune-${name//[\/@]/_}.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
rm -f "$out"/user.sqlite*
timeout 70 python -m autocutlass.cli bench --shapes $few --only "*/fprop" --policy cached --no-first-call --rounds 5 \
  --out "$k/bench-fewtiles-after" >"$k/bench-fewtiles-after.txt" 2>>"$k/log.txt"
stamp "bench after: rc $? $(grep geomean "$k/bench-fewtiles-after.txt" | cut -c1-150)"
(cd "$out" && tar czf s33d.tar.gz keep/ && rm -rf user.sqlite*)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
for f in before after; do grep -v "^hit-path" "$k/bench-fewtiles-$f.txt" | cut -c1-150; done
