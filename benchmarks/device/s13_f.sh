#!/usr/bin/env bash
# Session 13, part F (~6 min on one H100): the rest of the GPU tests after the session's changes
# (the direct launch, SwiGLU on by default, the source-hash cache): kernels, conv (all three
# directions, pointwise), grouped, scaled_mm, reduce, transpose, cold start.   bash benchmarks/device/s13_f.sh OUT
set -u
out=${1:?OUT}; w=$out/f; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=/tmp/tests.sqlite timeout 540 python -m pytest -q -p no:warnings -m gpu -n 14 \
    tests/test_gpu_kernels.py tests/test_gpu_conv.py tests/test_gpu_conv_pointwise.py tests/test_gpu_conv_backward.py \
    tests/test_gpu_grouped.py tests/test_gpu_scaled_mm.py tests/test_gpu_reduce.py tests/test_gpu_transpose.py \
    tests/test_cold_start.py >"$w/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$w/gpu-tests.txt")"
grep -E "^(FAILED|ERROR)" "$w/gpu-tests.txt" | head -30 >&2
stamp done
