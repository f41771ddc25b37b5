#!/usr/bin/env bash
# Session 36, call c: rn50-l4-3x3 (and l3-3x3) as the conv kernel and as a plain GEMM of the same
# implicit-GEMM shape (benchmarks/shapes-conv-as-gemm.json) with the same tile configs, beside cuDNN
# and cuBLAS: is the few-tile conv's time in the im2col load or in the main loop?
set -u
export PYTHONUNBUFFERED=1
C=benchmarks/shapes-conv.json
G=benchmarks/shapes-conv-as-gemm.json
cfgs=()
for fam in hopper_conv hopper_gemm; do
  cfgs+=(--config "$fam:{\"tile_m\":64,\"tile_n\":128,\"tile_k\":128,\"cluster_n\":2,\"raster\":\"along_n\"}"
         --config "$fam:{\"tile_m\":64,\"tile_n\":128,\"tile_k\":128}"
         --config "$fam:{\"tile_m\":64,\"tile_n\":128,\"tile_k\":64}"
         --config "$fam:{\"tile_m\":128,\"tile_n\":128,\"tile_k\":64}"
         --config "$fam:{\"tile_m\":128,\"tile_n\":64,\"tile_k\":64,\"schedule\":\"pingpong\"}"
         --config "$fam:{\"tile_m\":64,\"tile_n\":256,\"tile_k\":64}"
         --config "$fam:{\"tile_m\":64,\"tile_n\":128,\"tile_k\":128,\"stages\":2}"
         --config "$fam:{\"tile_m\":64,\"tile_n\":128,\"tile_k\":128,\"stages\":3}")
done
timeout 500 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 7 \
  --case $C:rn50-l4-3x3/fprop --case $G:rn50-l4-3x3-as-gemm --case $C:rn50-l3-3x3/fprop --case $G:rn50-l3-3x3-as-gemm \
  "${cfgs[@]}" --json "$OUT/probe.json" > "$OUT/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "us  vendor|NOT VER|failed" "$OUT/probe.txt" | cut -c1-140
