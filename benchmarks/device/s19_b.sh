#!/usr/bin/env bash
# Session 19: where a convnet training step on autocutlass loses (issue 18's end-to-end target).
# (1) conv_train_probe: ResNet-50 b128 and the UNet-style block stack b8, every convolution through
# autocutlass (cached policy, shipped database) vs torch with cudnn.benchmark, and the kernels'
# GPU time per step; (2) conv_train_host_probe on both models: host time per step, cProfile's
# costliest functions and the CUDA runtime calls.
#   bash benchmarks/device/s19_b.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
export AUTOCUTLASS_POLICY=cached
timeout 240 python benchmarks/probes/conv_train_probe.py --rounds 7 --steps 5 --profile 12 \
    --json "$out/conv-train.json" >"$out/conv-train.txt" 2>&1
stamp "train probe: rc $? $(grep -v '^\[' "$out/conv-train.txt" | tail -14 | cut -c1-200)"
for m in unet resnet50; do
    timeout 150 python benchmarks/probes/conv_train_host_probe.py --model $m --steps 3 --top 40 \
        >"$out/conv-train-host-$m.txt" 2>&1
    stamp "host probe $m: rc $? $(grep -E 'per step' "$out/conv-train-host-$m.txt" | head -4)"
done
