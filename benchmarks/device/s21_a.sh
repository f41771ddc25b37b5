#!/usr/bin/env bash
# For the next session with device time: the GPU tests session 20's 560-second call did not reach
# (test_gpu_kernels.py onward, in the alphabetical order pytest collects), and the tiny conv bench
# test whose expectation session 20 changed (a 3x3 wgrad under policy 'heuristic' now runs the
# wgrad family's default config). Also the wgrad and GEMM GPU tests after session 20's review mend
# (both runners count their split-K scratch with hopper_gemm.runner.scratch_slots now).
#   bash benchmarks/device/s21_a.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
timeout 560 python -m pytest -q -m gpu -p no:cacheprovider tests/test_cli_bench_conv.py tests/test_gpu_kernels.py \
    "tests/test_gpu_conv_backward.py::test_wgrad_kernel" "tests/test_gpu_conv_backward.py::test_split_reductions_give_the_same_bits_twice" \
    tests/test_gpu_packed.py tests/test_gpu_reduce.py tests/test_gpu_scaled_mm.py tests/test_gpu_swiglu.py \
    tests/test_gpu_transpose.py tests/test_search_gpu.py >"$out/gpu-tests-rest.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-rest.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR" "$out/gpu-tests-rest.txt" | cut -c1-300 | head -30 >&2
