#!/usr/bin/env bash
# Session 38, call i (H200): ncu of `odd` (2000x3000x1000 'nn'): our shipped record (256x192 in a 1x2 cluster,
# one wave of 128 tiles) beside cuBLAS's kernel, two launches each (no L2 flush between them).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
LAYOUT=nn timeout 200 ncu --clock-control none --kernel-name regex:"cutlass_kernel|nvjet|sm90_xmma|gemm" --launch-skip 6 \
  --launch-count 4 --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
  --section WarpStateStats \
  python benchmarks/probes/ncu_probe.py "{'tile_m':256,'tile_n':192,'tile_k':64,'cluster_n':2}" 2000 3000 1000 \
  >"$k/ncu-odd.txt" 2>&1
echo "ncu: rc $?"
grep -E "^  [a-zA-Z_]|Duration|SM Frequency|DRAM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache|DRAM Throughput|Grid Size|Cluster Size|Registers|Warp Cycles Per Issued|Stall" "$k/ncu-odd.txt" | cut -c1-150 | head -80
(cd "$OUT" && tar czf s38i.tar.gz keep/ && rm -rf keep)
