#!/usr/bin/env bash
# Session 20: ResNet-50 b128's non-pointwise wgrad layers tuned with the new hopper_conv_wgrad space
# (benchmarks/shapes-conv-resnet50.json) on top of the conv suite's (s20_d: WGRAD_DB), then the
# training steps of conv_train_probe (ResNet-50 b128, the UNet-style stack b8) with the wgrad
# kernel on by default, cached policy, the shipped database plus those records.
#   WGRAD_DB=path bash benchmarks/device/s20_e.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
db=$out/train.sqlite
cp "${WGRAD_DB:?}" "$db"
timeout 200 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv-resnet50.json --only '*/wgrad' --trials 16 \
    --timeout 18 --db "$db" --json "$out/rn50-wgrad-tune.json" >"$out/rn50-wgrad-tune.log" 2>&1
stamp "tune: rc $? $(grep -v '^\[I ' "$out/rn50-wgrad-tune.log" | grep -v 'trials/s' | tail -12 | cut -c1-170)"
python -c "import sqlite3; sqlite3.connect('$db').execute('PRAGMA wal_checkpoint(TRUNCATE)')"
AUTOCUTLASS_DB=$db AUTOCUTLASS_POLICY=cached timeout 300 python benchmarks/probes/conv_train_probe.py --rounds 7 \
    --steps 5 --json "$out/conv-train-wgrad-on.json" >"$out/conv-train-wgrad-on.txt" 2>&1
stamp "train probe: rc $? $(grep -E '^(resnet50|unet):' "$out/conv-train-wgrad-on.txt" | cut -c1-200)"
