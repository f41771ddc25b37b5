#!/usr/bin/env bash
# Session 20: pointwise (1x1, stride 1) wgrad on hopper_conv_wgrad (workspace slabs up to 64 splits)
# instead of the GEMM family, whose split-K stops at 16 and loses to cuDNN on 13 of the 14 shipped
# layers: the conv suite's two pointwise wgrads and ResNet-50 b128's twelve tuned with
# --family hopper_conv_wgrad into OUT/pw.sqlite (16 trials), then the suite's two benched from it.
#   bash benchmarks/device/s20_i.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
db=$out/pw.sqlite
timeout 150 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --only rn50-l1-1x1-up/wgrad \
    --only rn50-l3-1x1/wgrad --family hopper_conv_wgrad --trials 16 --timeout 18 --db "$db" \
    --json "$out/pw-suite-tune.json" >"$out/pw-suite-tune.log" 2>&1
stamp "suite: rc $? $(grep -v '^\[I ' "$out/pw-suite-tune.log" | grep -v 'trials/s' | tail -4 | cut -c1-170)"
only=(); for h in "56-64-64" "56-256-64" "56-64-256" "56-256-128" "28-512-128" "28-128-512" "28-512-256" \
    "14-1024-256" "14-256-1024" "14-1024-512" "7-2048-512" "7-512-2048"; do only+=(--only "rn50-b128-pw-$h/wgrad"); done
timeout 260 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv-resnet50.json "${only[@]}" \
    --family hopper_conv_wgrad --trials 16 --timeout 16 --db "$db" --json "$out/pw-rn50-tune.json" \
    >"$out/pw-rn50-tune.log" 2>&1
stamp "rn50: rc $? $(grep -v '^\[I ' "$out/pw-rn50-tune.log" | grep -v 'trials/s' | tail -14 | cut -c1-170)"
python -c "import sqlite3; sqlite3.connect('$db').execute('PRAGMA wal_checkpoint(TRUNCATE)')"
