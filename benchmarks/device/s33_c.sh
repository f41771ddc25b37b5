#!/usr/bin/env bash
# Session 33, call c (H100): 64-column tiles on the few-tile 3x3 layers. cuDNN's kernel for rn50-l4-3x3 is a
# 128x64x64 tile (ncu, call b); the 'narrow' grid of the hopper_conv space (tiles of 64 columns, two 64x64
# consumer warpgroups in a 128-row tile, every cluster, K splits serial/workspace) on rn50-l4-3x3, rn50-l3-3x3
# and two few-tile layers of benchmarks/shapes-conv-fewtiles.json, beside the shipped H100 record and cuDNN.
#   bash benchmarks/device/s33_c.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
timeout 420 python benchmarks/probes/conv_probe.py --grid narrow --workers 14 --configs 3 --rounds 5 --records $db \
  --shapes benchmarks/shapes-conv-fewtiles.json --layers rn50-l4-3x3,rn50-l3-3x3,rn50-l4-3x3-b8,sd-1280@16-b2 \
  --json "$k/grid-narrow.json" >"$k/grid-narrow.txt" 2>&1
stamp "narrow grid: rc $?"
(cd "$out" && tar czf s33c.tar.gz keep/)
grep -h "sweep, fastest\|compiled in .*processes" "$k"/grid-*.txt | cut -c1-400
grep -hv "^#\|compiled in\|sweep\|timed in" "$k"/grid-*.txt | tail -24 | cut -c1-160
