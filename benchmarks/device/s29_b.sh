#!/usr/bin/env bash
# Session 29, an H100: the conv suite's weakest wgrad layers and the pointwise fprop below cuDNN tuned again into a
# fresh database, each search starting from the databases' priors (the shipped H100 record of the problem, the H200
# file's record as a sibling's, the nearest class winners: `tune` now reads them); merged on the machine into the
# shipped H100 file (the faster record of each problem stays); then, as a user gets that file (policy cached), the
# conv suite's fprop and wgrad against cuDNN. One archive back.
#   bash benchmarks/device/s29_b.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
db=$k/tuned.sqlite
tune() {  # trials family case...
  local trials=$1 fam=$2; shift 2
  for name in "$@"; do
    timeout 110 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --only "$name" --trials "$trials" \
      ${fam:+--family $fam} --db "$db" --json "$k/tune-${name//[\/@]/_}-${fam:-first}.json" >>"$k/tune.txt" 2>>"$k/log.txt"
    stamp "tune $name ${fam:-first} x$trials: rc $?"
  done
}
tune 40 "" rn50-stem/wgrad
tune 24 hopper_conv_wgrad rn50-l1-1x1-up/wgrad
tune 16 hopper_gemm rn50-l1-1x1-up/wgrad
tune 16 hopper_gemm rn50-l3-1x1/fprop
tune 16 "" sd-320@64/wgrad sd-640@32/wgrad sd-640@32-fp16/wgrad
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
for d in wgrad fprop; do
  timeout 120 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/$d" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$d" >"$k/bench-$d.txt" 2>>"$k/log.txt"
  stamp "bench $d: rc $? $(grep geomean "$k/bench-$d.txt" | cut -c1-150)"
done
(cd "$out" && tar czf s29b.tar.gz keep/ && rm -rf user.sqlite*)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
grep -E "geomean" "$k"/bench-*.txt | cut -c1-200
