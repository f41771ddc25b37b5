#!/usr/bin/env bash
# Session 26, call 9 (an H100): ncu of the conv suite's two large wgrad layers still below cuDNN on
# every machine (sd-320@64, sd-640@32): our shipped config beside cuDNN's kernel (the first wgrad-named
# launches of conv_wgrad_probe.py --shipped-only: our verification launch, the float32 reference,
# then the timed bf16 launches), SpeedOfLight and MemoryWorkloadAnalysis sections.
#   bash benchmarks/device/s26_g.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off
for layer in sd-320@64 sd-640@32; do
  timeout 150 ncu --clock-control none --kernel-name regex:"wgrad" --launch-count 8 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis python benchmarks/probes/conv_wgrad_probe.py --layers $layer --shipped-only \
    --rounds 1 --workers 2 >"$out/ncu-${layer/@/-}.txt" 2>&1
  stamp "ncu $layer: rc $?"
  grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|L2 Hit|SM Frequency" "$out/ncu-${layer/@/-}.txt" | head -60 | cut -c1-150 >&2
done
