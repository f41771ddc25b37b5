#!/usr/bin/env bash
# Session 16's GPU work, run first in the next session that has a GPU (session 16 had none):
# the GPU tests of session 15's last dispatch change, of swap_experts_ and of session 16's
# correctness fixes (pointwise convs at several batches, dense strides, grouped offs), then the transformers
# Qwen3-MoE block (experts 'autocutlass' vs transformers' 'grouped_mm', grouped kernels off and on).
#   bash benchmarks/device/s16_a.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 300 python -m pytest -q -m gpu tests/test_gpu_gemv.py tests/test_gpu_dispatch.py tests/test_gpu_experts.py \
    tests/test_gpu_packed.py tests/test_gpu_conv_pointwise.py tests/test_gpu_conv.py tests/test_gpu_grouped.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
for k in 0 1; do
    AUTOCUTLASS_GROUPED_KERNELS=$k timeout 150 python benchmarks/probes/hf_moe_probe.py --json "$out/hf-moe-k$k.json" \
        >"$out/hf-moe-k$k.txt" 2>&1
    stamp "hf moe (grouped kernels $k): rc $? $(tail -1 "$out/hf-moe-k$k.txt" | cut -c1-250)"
done
