#!/usr/bin/env bash
# Session 33, call a (H100): a structured grid of the hopper_conv space on the ResNet-50 3x3 layers with C >= 256
# that read below cuDNN in session 32 (issue 17's per-layer target): rn50-l4-3x3 (52 tiles of 128x128: the
# 'few' grid, tiles x clusters x K splits serial/workspace), rn50-l3-3x3-b128 and rn50-l4-3x3-b256 (the 'large'
# grid, tiles x clusters x schedules x rasters x swizzles). Every candidate compiled first in 14 processes,
# verified against float32 (NaN-poisoned), timed once (L2 flushed); the fastest 4 beside the shipped H100
# record and cuDNN (benchmark mode) in 5 interleaved rounds.
#   bash benchmarks/device/s33_a.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
timeout 250 python benchmarks/probes/conv_probe.py --grid few --workers 14 --configs 4 --rounds 5 --records $db \
  --layers rn50-l4-3x3 --json "$k/grid-few.json" >"$k/grid-few.txt" 2>&1
stamp "few grid: rc $?"
timeout 300 python benchmarks/probes/conv_probe.py --grid large --workers 14 --configs 4 --rounds 5 --records $db \
  --layers rn50-l3-3x3-b128,rn50-l4-3x3-b256 --json "$k/grid-large.json" >"$k/grid-large.txt" 2>&1
stamp "large grid: rc $?"
(cd "$out" && tar czf s33a.tar.gz keep/)
grep -h "sweep, fastest\|compiled in .*processes" "$k"/grid-*.txt | cut -c1-400
grep -hv "^#\|compiled in\|sweep\|timed in" "$k"/grid-*.txt | tail -30 | cut -c1-160
