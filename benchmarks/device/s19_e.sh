#!/usr/bin/env bash
# Session 19: host cost of small-batch training steps, conv sites on and off (conv_host_ab.py).
#   bash benchmarks/device/s19_e.sh OUT    (about 2 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
nvidia-smi --query-gpu=name --format=csv,noheader >&2
AUTOCUTLASS_POLICY=cached timeout 300 python benchmarks/probes/conv_host_ab.py --json "$out/conv-host-ab.json" \
    >"$out/conv-host-ab.txt" 2>&1
echo "rc $?" >&2; grep -E "^(resnet50|unet) " "$out/conv-host-ab.txt" >&2
