#!/usr/bin/env bash
# Session 34, call c: the conv suite's wgrad layers, each shipped record with its split order
# interleaved (``interleave``) beside it and cuDNN (benchmark mode): conv_wgrad_probe --shipped-only --interleave.
#   bash benchmarks/device/s34_c.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 540 python benchmarks/probes/conv_wgrad_probe.py --shipped-only --interleave --rounds 5 \
  --json "$k/wgrad-interleave.json" >"$k/wgrad-interleave.txt" 2>&1
echo "wgrad probe rc $?"
grep -A40 "^layer " "$k/wgrad-interleave.txt" | grep -v "^best" | head -60
