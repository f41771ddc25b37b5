#!/usr/bin/env bash
# Session 36, call g (H200): the conv suite's wgrad layers with the most room (sd-320@64 at 69% of the roof,
# rn50-l3-3x3 at 44%, rn50-l3-1x1 below cuDNN) tuned again from the priors, 24 trials each; merged on the machine
# into the shipped file (the faster record of each problem kept); the wgrad suite as a user gets that file.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
db=$k/tuned.sqlite
for spec in "sd-320@64/wgrad:hopper_conv_wgrad" "rn50-l3-3x3/wgrad:hopper_conv_wgrad" "rn50-l3-1x1/wgrad:hopper_conv_wgrad" \
            "rn50-l3-1x1/wgrad:hopper_gemm"; do
  name=${spec%%:*}; fam=${spec##*:}
  timeout 100 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --only "$name" --trials 24 \
    --family "$fam" --db "$db" --json "$k/tune-${name//[\/@]/_}-$fam.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  echo "tune $name $fam: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H200.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$OUT/merged.sqlite" >"$k/merge.txt" 2>&1
echo "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$OUT/merged.sqlite" "$ship"
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 130 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/wgrad" --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-wgrad" >"$k/bench-wgrad.txt" 2>>"$k/log.txt"
echo "bench wgrad: rc $? $(grep geomean "$k/bench-wgrad.txt" | cut -c1-150)"
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-220
grep -E "sd-320@64|rn50-l3-3x3/|rn50-l3-1x1" "$k/bench-wgrad.txt" | cut -c1-200
(cd "$OUT" && tar czf s36g.tar.gz keep/ && rm -rf keep user.sqlite*)
