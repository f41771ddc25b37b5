#!/usr/bin/env bash
# Session 20: the conv suite's 3x3 wgrad directions tuned with the new hopper_conv_wgrad space
# (several taps per tile, workspace split-K up to 64 splits) into OUT/wgrad.sqlite (16 trials,
# 18 s a problem), then benched from it with vendor verdicts on (3 rounds).
#   bash benchmarks/device/s20_d.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
export AUTOCUTLASS_CONV_WGRAD=1
db=$out/wgrad.sqlite
only=()
for n in rn50-l1-3x3 rn50-b8-3x3-64 rn50-l2-3x3 rn50-l2-3x3-s2 rn50-l3-3x3 rn50-l3-3x3-b128 rn50-l4-3x3 \
         rn50-l4-3x3-b256 sd-320@64 sd-640@32 sd-1280@16 sdxl-640@64 vae-512@128 vae-256@512 sd-640@32-fp16; do
    only+=(--only "$n/wgrad")
done
timeout 400 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json "${only[@]}" --trials 16 --timeout 18 \
    --db "$db" --json "$out/wgrad-tune.json" >"$out/wgrad-tune.log" 2>&1
stamp "tune: rc $? $(grep -v '^\[I ' "$out/wgrad-tune.log" | grep -v 'trials/s' | tail -20 | cut -c1-170)"
python -c "import sqlite3; sqlite3.connect('$db').execute('PRAGMA wal_checkpoint(TRUNCATE)')"
AUTOCUTLASS_DB=$db timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json "${only[@]}" \
    --policy cached --no-first-call --rounds 3 --out "$out/bench-wgrad" >"$out/bench-wgrad.log" 2>&1
stamp "bench: rc $? $(grep -v '^\[' "$out/bench-wgrad.log" | tail -24 | cut -c1-170)"
