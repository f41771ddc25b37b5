#!/usr/bin/env bash
# Session 33, call f (H100): the conv forward's GPU tests with the narrow workspace-split cases
# (tests/test_gpu_conv.py: correctness against float32 with NaN-poisoned outputs, bitwise determinism).
#   bash benchmarks/device/s33_f.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 420 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv.py >"$k/gpu-tests-conv.txt" 2>&1
echo "gpu tests conv: rc $? $(tail -1 "$k/gpu-tests-conv.txt")"
grep -E "PASS|FAIL|Error" "$k/gpu-tests-conv.txt" | head -20
