#!/usr/bin/env bash
# Session 17's second GPU call: session 16's GPU tests other than the grouped family's (its
# correctness fixes: pointwise convs across batches, dense strides, weak weight views; session
# 15's dispatch change; swap_experts_).
#   bash benchmarks/device/s17_b.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 560 python -m pytest -q -m gpu tests/test_gpu_gemv.py tests/test_gpu_dispatch.py tests/test_gpu_experts.py \
    tests/test_gpu_packed.py tests/test_gpu_conv_pointwise.py tests/test_gpu_conv.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR" "$out/gpu-tests.txt" | head -12 >&2
