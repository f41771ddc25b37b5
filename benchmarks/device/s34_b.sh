#!/usr/bin/env bash
# Session 34, call b: the interleaved split order (HopperGemmConfig.interleave) on the GPU.
# GPU tests of the new cases (GEMM and wgrad correctness against float32 on NaN-poisoned outputs,
# bitwise determinism), then split_order_gemm_probe (contiguous vs interleaved, vs torch.matmul).
#   bash benchmarks/device/s34_b.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
export AUTOCUTLASS_CACHE_DIR=$out/cache
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_kernels.py \
  -k "sk5wi or sk7i or sk16wi or sk4i or sk11i or sk3wi or sk2i or deterministic" >"$k/gpu-tests-gemm.txt" 2>&1
echo "gpu tests gemm: rc $? $(tail -1 "$k/gpu-tests-gemm.txt")"
timeout 120 python -m pytest -q -p no:cacheprovider "tests/test_gpu_conv_backward.py::test_wgrad_kernel[35]" \
  "tests/test_gpu_conv_backward.py::test_wgrad_kernel[36]" "tests/test_gpu_conv_backward.py::test_wgrad_kernel[37]" \
  tests/test_gpu_conv_backward.py::test_split_reductions_give_the_same_bits_twice >"$k/gpu-tests-wgrad.txt" 2>&1
echo "gpu tests wgrad: rc $? $(tail -1 "$k/gpu-tests-wgrad.txt")"
(cd benchmarks/probes && timeout 300 python split_order_gemm_probe.py --rounds 5 --cache "$out/probe-cache" \
  --json "$k/split-order-gemm.json") >"$k/split-order-gemm.txt" 2>&1
echo "gemm probe rc $?"
tail -22 "$k/split-order-gemm.txt"
