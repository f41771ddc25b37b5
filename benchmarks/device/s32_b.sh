#!/usr/bin/env bash
# Session 32, call b (H100, the shipped H100 file rekeyed to the stream-K conv sources):
# 1. tune the suite's Stable Diffusion 16x16 / 32x32 layers again from the priors (stream-K in their space and the
#    model's stream-K pick in their seeds), 12 trials each, into a user database;
# 2. the UNet-style stack's training step under torch.compile(mode="reduce-overhead") on both sides (CUDA graphs:
#    neither side's host time shows), then eager, with those records;
# 3. ncu: our cooperative 128x256 2x1-cluster tile beside cuBLAS on a 4096 x 4096 x 8192 'nt' GEMM (clocks,
#    throughput, warp states, launch shape).
#   bash benchmarks/device/s32_b.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
export AUTOCUTLASS_DB="sqlite:///$out/user.sqlite"
timeout 200 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --only sd-1280@16/fprop --only sd-640@32/fprop --only sdxl-640@64/fprop \
  --trials 12 --json "$k/tune-sd.json" >"$k/tune-sd.txt" 2>&1
stamp "tune: rc $?"
AUTOCUTLASS_POLICY=cached timeout 330 python benchmarks/probes/conv_train_probe.py --models unet --compile reduce-overhead \
  --rounds 5 --steps 5 --json "$k/train-unet-compiled.json" >"$k/train-unet-compiled.txt" 2>&1
stamp "unet compiled: rc $? $(grep -h 'unet:' "$k/train-unet-compiled.txt" | tail -1)"
timeout 120 ncu --clock-control none --kernel-name regex:"cutlass_kernel|nvjet|sm90_xmma" --launch-skip 2 --launch-count 4 \
  --section SpeedOfLight --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis \
  python benchmarks/probes/ncu_probe.py "{'tile_m':128,'tile_n':256,'tile_k':64,'cluster_m':2}" 4096 4096 8192 \
  >"$k/ncu-square-4k-k8192.txt" 2>&1
stamp "ncu: rc $?"
cp "$out/user.sqlite" "$k/" 2>/dev/null
(cd "$out" && tar czf s32b.tar.gz keep/)
tail -25 "$k/tune-sd.txt" | cut -c1-180
grep -h "unet:" "$k/train-unet-compiled.txt"
grep -E "^  [a-z_]|Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Grid Size|Registers|Executed Ipc A|Issue Slots Busy|Warp Cycles Per Issued" "$k/ncu-square-4k-k8192.txt" | cut -c1-150
