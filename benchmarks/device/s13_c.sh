#!/usr/bin/env bash
# Session 13, part C (~9 min on one H100): the GPU tests of the fused SwiGLU family (switched on
# for the run), the gated family and the GEMM dispatch paths (the direct launch), then the gated
# MLP benchmark (fused SwiGLU, gated path, torch unfused) at Llama-3 8B / 70B prefill and decode.
#   bash benchmarks/device/s13_c.sh OUT [CASES]
set -u
out=${1:?OUT}; cases=${2:-l8b@8192,l70b@8192,l8b@1,l8b@64}; w=$out/c; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_SWIGLU_KERNELS=1 AUTOCUTLASS_DB=/tmp/tests.sqlite timeout 300 python -m pytest -q -p no:warnings -m gpu -n 12 \
    tests/test_gpu_swiglu.py tests/test_gpu_gated.py tests/test_gpu_dispatch.py tests/test_gpu_torch_ops.py \
    >"$w/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$w/gpu-tests.txt")"
grep -E "^(FAILED|ERROR)" "$w/gpu-tests.txt" | head -30 >&2
AUTOCUTLASS_DB=$w/mlp.sqlite timeout 280 python benchmarks/probes/gated_mlp_bench.py --trials 12 --rounds 5 \
    --cases "$cases" --json "$w/gated-mlp.json" >"$w/gated-mlp.txt" 2>&1
stamp "gated mlp: rc $? $(grep -v '^\[I ' "$w/gated-mlp.txt" | tail -16 | cut -c1-220)"
stamp done
