#!/usr/bin/env bash
# For the next session with device time, first: session 18's CPU-only change checked on a GPU.
# Verification now fills split-K / stream-K partial sums with NaN before each launch
# (ops.guards.poison_scratch); the GPU tests of the families with split-K or stream-K configs
# (GEMM, conv fprop, dgrad, wgrad) show whether any kernel reads a partial it has not written.
#   bash benchmarks/device/s19_a.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
timeout 560 python -m pytest -q -m gpu tests/test_gpu_kernels.py tests/test_search_gpu.py tests/test_gpu_conv.py \
    tests/test_gpu_conv_backward.py >"$out/gpu-tests-scratch.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-scratch.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR|NaN/Inf" "$out/gpu-tests-scratch.txt" | head -20 >&2
