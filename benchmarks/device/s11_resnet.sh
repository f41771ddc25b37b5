#!/usr/bin/env bash
# Session 11's ResNet-50 inference check of autocutlass.nn.fuse_conv_bn (prepared without device
# time; about 7 minutes on one GPU): torchvision ResNet-50, bf16, channels_last, batch 128, eval;
# ours (swap_conv2d_), ours-fused (BatchNorm folded, adds and ReLUs in the conv epilogues) against
# torch with cudnn.benchmark and torch's own conv-BN folding, after tuning the warm-up's misses
# (the fused epilogues are new problems) at 8 trials each. Needs the shipped databases.
#   bash benchmarks/device/s11_resnet.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=$out/rn50.sqlite timeout 560 python benchmarks/probes/resnet50_e2e.py --batch 128 --rounds 5 --iters 10 \
    --fuse-bn --tune-misses 8 --json "$out/rn50-fused.json" >"$out/rn50-fused.log" 2>&1
stamp "rn50 fused: rc $? $(grep -E '^(ResNet|fused|#)' "$out/rn50-fused.log" | tail -5)"
