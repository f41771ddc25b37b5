#!/usr/bin/env bash
# Session 36, call f (H200): stream-K with 64-row tiles on the few-tile layers (rn50-l4-3x3 fprop and dgrad at
# batch 32: 100 tiles of 64x128 on 132 SMs; session 32's conv stream-K probe timed 128-row tiles only), beside
# the records and cuDNN (benchmarks/probes/config_probe.py).
set -u
export PYTHONUNBUFFERED=1
C=benchmarks/shapes-conv.json
cfgs=()
for fam in hopper_conv hopper_conv_dgrad; do
  cfgs+=(--config "$fam:{\"tile_m\":64,\"tile_n\":128,\"tile_k\":128,\"stream_k\":true}"
         --config "$fam:{\"tile_m\":64,\"tile_n\":128,\"tile_k\":128,\"cluster_n\":2,\"stream_k\":true}"
         --config "$fam:{\"tile_m\":64,\"tile_n\":128,\"tile_k\":128,\"cluster_m\":2,\"stream_k\":true}"
         --config "$fam:{\"tile_m\":64,\"tile_n\":128,\"tile_k\":64,\"stream_k\":true}"
         --config "$fam:{\"tile_m\":64,\"tile_n\":256,\"tile_k\":64,\"stream_k\":true}"
         --config "$fam:{\"tile_m\":128,\"tile_n\":128,\"tile_k\":128,\"stream_k\":true}"
         --config "$fam:{\"tile_m\":128,\"tile_n\":128,\"tile_k\":64,\"stream_k\":true}")
done
timeout 400 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 7 \
  --case $C:rn50-l4-3x3/fprop --case $C:rn50-l4-3x3/dgrad --case $C:rn50-l3-3x3/fprop \
  "${cfgs[@]}" --json "$OUT/probe.json" > "$OUT/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "us  vendor|NOT VER|failed" "$OUT/probe.txt" | cut -c1-140
