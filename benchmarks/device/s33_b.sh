#!/usr/bin/env bash
# Session 33, call b (H100): why no config of the hopper_conv space beats cuDNN on rn50-l4-3x3 (32x7x7x512,
# K 512, 3x3; 52 tiles of 128x128). 1. the 'few' grid again with every candidate's single timing kept in the JSON;
# 2. ncu (no clock control) of the record (64x128x128 c1x2), 128x128 tiles split 2 ways (serial; in a 2x2
# cluster; through the workspace), the 128x256 tile split 5 ways through the workspace, and cuDNN.
#   bash benchmarks/device/s33_b.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
timeout 200 python benchmarks/probes/conv_probe.py --grid few --workers 14 --configs 4 --rounds 5 --records $db \
  --layers rn50-l4-3x3 --json "$k/grid-few-all.json" >"$k/grid-few-all.txt" 2>&1
stamp "few grid: rc $?"
timeout 200 ncu --profile-from-start off --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section LaunchStats --section Occupancy \
  python benchmarks/probes/conv_ncu_probe.py 32 7 7 512 512 3 3 1 \
  "{'tile_m':64,'tile_n':128,'tile_k':128,'cluster_n':2,'raster':'along_n'}" \
  "{'tile_m':128,'tile_n':128,'tile_k':64,'split_k':2}" \
  "{'tile_m':128,'tile_n':128,'tile_k':64,'cluster_m':2,'cluster_n':2,'split_k':2}" \
  "{'tile_m':128,'tile_n':128,'tile_k':64,'split_k':2,'split_mode':'workspace'}" \
  "{'tile_m':128,'tile_n':256,'tile_k':64,'split_k':5,'split_mode':'workspace'}" \
  >"$k/ncu-rn50-l4-3x3.txt" 2>&1
stamp "ncu: rc $?"
(cd "$out" && tar czf s33b.tar.gz keep/)
python - "$k/grid-few-all.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
sw = sorted(d["sweep"], key=lambda r: r["us"])
for r in sw[:12] + sw[12::12]:
    print(f'{r["us"]:7.1f} {r["kernel"]}')
PY
grep -E "^  [a-zA-Z_]|launch [0-9]|Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit Rate|Mem Busy|Max Bandwidth|Registers Per|Grid Size|Cluster Size|Achieved Occupancy|Warp Cycles Per Issued" "$k/ncu-rn50-l4-3x3.txt" | cut -c1-140 | head -120
