#!/usr/bin/env bash
# Session 24, call 12 (an H100): the GPU tests of the search, dispatch and GEMM kernels with the
# session's final code (the wave model's split picks feed the tuner's seeds).
#   bash benchmarks/device/s24_j.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 420 python -m pytest -q -x tests/test_search_gpu.py tests/test_gpu_dispatch.py tests/test_gpu_kernels.py \
    tests/test_gpu_reduce.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt")"
