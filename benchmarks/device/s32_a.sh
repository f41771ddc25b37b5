#!/usr/bin/env bash
# Session 32, call a: stream-K in the conv forward (hopper_conv stream_k). The new GPU cases first (fprop and
# dgrad correctness, residues, epilogues, clusters, bitwise determinism), then benchmarks/probes/conv_probe.py
# --stream-k on the few-wave layers (ResNet-50 stages 3-4, Stable Diffusion 16x16 and 32x32, the few-tile file's
# batch 1-8 layers): stream-K configs beside the shipped H100 record and cuDNN (benchmark mode), L2 flushed,
# interleaved; then the GPU tests owed by session 31 (torch ops, the conv backward's NCHW / site / training cases).
#   bash benchmarks/device/s32_a.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv.py tests/test_gpu_conv_backward.py \
  -k "streamk or stream_k or dgrad_on_the_fprop" >"$k/gpu-tests-streamk.txt" 2>&1
stamp "gpu tests stream-K: rc $? $(tail -1 "$k/gpu-tests-streamk.txt")"
timeout 280 python benchmarks/probes/conv_probe.py --stream-k --configs 1 --rounds 3 \
  --records tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite --shapes benchmarks/shapes-conv-fewtiles.json \
  --layers rn50-l4-3x3-b256,rn50-l3-3x3-b128,rn50-l4-3x3,rn50-l3-3x3,sd-1280@16,sd-640@32,sd-1280@16-b2,sd-640@32-b1,rn50-l4-3x3-b8 \
  --json "$k/conv-streamk-probe.json" >"$k/conv-streamk-probe.txt" 2>&1
stamp "stream-K probe: rc $?"
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_gpu_torch_ops.py \
  "tests/test_gpu_conv_backward.py" -k "not streamk and (torch_ops or nchw or site or training or pointwise_conv2d or compiled or reduce_overhead or linear or matmul)" \
  >"$k/gpu-tests-owed.txt" 2>&1
stamp "gpu tests owed: rc $? $(tail -1 "$k/gpu-tests-owed.txt")"
(cd "$out" && tar czf s32a.tar.gz keep/)
grep -v "^#" "$k/conv-streamk-probe.txt" | tail -75 | cut -c1-160
