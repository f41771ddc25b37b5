#!/usr/bin/env bash
# Session 36, call b: the GEMM family's fitted tile widths (80, 112, ...) in the conv family, on the
# layers whose tiles they fit into one wave (rn50-l4-3x3 at batch 32: 125 tiles of 64x112 against 100
# of 64x128 on 132 SMs; the few-tile file's sd-1280@16-b2 and sd-640@32-b1: 128 tiles of 64x80),
# against the shipped H200 records and cuDNN (benchmarks/probes/config_probe.py).
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
C=benchmarks/shapes-conv.json
F=benchmarks/shapes-conv-fewtiles.json
cfgs=()
for fam in hopper_conv hopper_conv_dgrad; do
  for tn in 112 80; do
    cfgs+=(--config "$fam:{\"tile_m\":64,\"tile_n\":$tn,\"tile_k\":128}"
           --config "$fam:{\"tile_m\":64,\"tile_n\":$tn,\"tile_k\":128,\"raster\":\"along_n\"}"
           --config "$fam:{\"tile_m\":64,\"tile_n\":$tn,\"tile_k\":128,\"cluster_m\":2}"
           --config "$fam:{\"tile_m\":64,\"tile_n\":$tn,\"tile_k\":64}"
           --config "$fam:{\"tile_m\":64,\"tile_n\":$tn,\"tile_k\":64,\"cluster_m\":2}")
  done
done
timeout 500 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 7 \
  --case $C:rn50-l4-3x3/fprop --case $C:rn50-l4-3x3/dgrad --case $F:sd-1280@16-b2/fprop --case $F:sd-640@32-b1/fprop \
  "${cfgs[@]}" --json "$OUT/probe.json" > "$OUT/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "us  vendor|NOT VER|failed" "$OUT/probe.txt" | cut -c1-140
tail -6 "$OUT/probe.txt"
