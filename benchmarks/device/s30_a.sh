#!/usr/bin/env bash
# Session 30: workspace split-K in the conv fprop family (hopper_conv's split_mode). GPU tests of the new
# configs (fprop and dgrad, determinism), then the conv suite's few-tile layers (the only ones whose space
# splits K: rn50-l4-3x3 and rn50-l3-3x3 at batch 32, forward and dgrad) tuned again into a fresh database from
# the databases' priors; merged on the machine into the shipped file of this GPU (the faster record of each
# problem stays); then, as a user gets that file (policy cached), the conv suite's fprop against cuDNN.
#   bash benchmarks/device/s30_a.sh OUT [TRIALS]    (about 9 minutes)
set -u
out=${1:?OUT}; trials=${2:-12}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 170 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv.py -k "sk or determin" \
  >"$k/gpu-tests-conv.txt" 2>&1
stamp "gpu tests conv: rc $? $(tail -1 "$k/gpu-tests-conv.txt")"
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv_backward.py -k "dgrad_on_the_fprop" \
  >"$k/gpu-tests-dgrad.txt" 2>&1
stamp "gpu tests dgrad: rc $? $(tail -1 "$k/gpu-tests-dgrad.txt")"
db=$k/tuned.sqlite
tune() {  # family case...
  local fam=$1; shift
  for name in "$@"; do
    timeout 100 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --only "$name" --trials "$trials" \
      --family "$fam" --db "$db" --json "$k/tune-${name//[\/@]/_}.json" >>"$k/tune.txt" 2>>"$k/log.txt"
    stamp "tune $name $fam x$trials: rc $?"
  done
}
tune hopper_conv rn50-l4-3x3/fprop rn50-l3-3x3/fprop
tune hopper_conv_dgrad rn50-l4-3x3/dgrad rn50-l3-3x3/dgrad
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
case "$gpu" in *H200*) ship=tuning_dbs/NVIDIA-H200.sqlite ;; *) ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite ;; esac
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 130 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/fprop" --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-fprop" >"$k/bench-fprop.txt" 2>>"$k/log.txt"
stamp "bench fprop: rc $? $(grep geomean "$k/bench-fprop.txt" | cut -c1-150)"
(cd "$out" && tar czf s30a.tar.gz keep/ && rm -rf user.sqlite*)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
grep -E "rn50-l[34]-3x3 |geomean" "$k/bench-fprop.txt" | cut -c1-200
