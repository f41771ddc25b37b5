#!/usr/bin/env bash
# Session 19: the conv sites' inference route on a real model: torchvision ResNet-50 b128 eval,
# swapped convolutions (sites) against torch (cudnn.benchmark on and off), logits compared, and
# fuse_conv_bn; plus a b8 run where the host matters more.
#   bash benchmarks/device/s19_g.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
export AUTOCUTLASS_POLICY=cached
for b in 128 8; do
    timeout 200 python benchmarks/probes/resnet50_e2e.py --batch $b --fuse-bn --json "$out/resnet50-infer-b$b.json" \
        >"$out/resnet50-infer-b$b.txt" 2>&1
    stamp "b$b: rc $? $(grep -v '^\[' "$out/resnet50-infer-b$b.txt" | grep -v 'served by' | tail -6 | cut -c1-200)"
done
