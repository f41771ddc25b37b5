#!/usr/bin/env bash
# Session 19: conv sites on and off, ResNet-50 b128 and the UNet-style stack b8 training steps vs
# torch (cudnn.benchmark), 11 rounds each, alternating processes: on, off, on, off.
#   bash benchmarks/device/s19_d.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
export AUTOCUTLASS_POLICY=cached
for i in 1 2; do
    for s in on off; do
        timeout 140 python benchmarks/probes/conv_train_probe.py --rounds 11 --steps 5 --sites $s \
            --json "$out/conv-train-sites-$s-$i.json" >"$out/conv-train-sites-$s-$i.txt" 2>&1
        stamp "sites $s ($i): rc $? $(grep -E '^(resnet50|unet):' "$out/conv-train-sites-$s-$i.txt" | cut -c1-60 | tr '\n' ' ')"
    done
done
