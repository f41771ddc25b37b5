#!/usr/bin/env bash
# Session 18, last call (H100): the grouped kernels on by default, tuned-only. With no setting but
# the shipped H100 database (session 18's grouped records), the grouped suite benched under policy
# cached (ours where this GPU's record serves, torch by verdict or as the stand-in of an untuned
# bucket), transformers' Qwen3-MoE block at 2048 tokens with swap_experts_' backend, and the GPU
# tests of dispatch and of the grouped public API.
#   bash benchmarks/device/s18_c.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
unset AUTOCUTLASS_GROUPED_KERNELS
timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-grouped.json --policy cached --no-first-call \
    --rounds 3 --out "$out/bench-grouped" >"$out/bench-grouped.log" 2>&1
stamp "bench (defaults, shipped records): rc $? $(grep -v '^\[' "$out/bench-grouped.log" | tail -28 | cut -c1-150)"
timeout 60 python benchmarks/probes/hf_moe_probe.py --tokens 2048 --json "$out/hf-moe-default-t2048.json" \
    >"$out/hf-moe-default-t2048.txt" 2>&1
stamp "hf moe 2048 tokens (defaults): rc $? $(tail -1 "$out/hf-moe-default-t2048.txt" | cut -c1-250)"
timeout 200 python -m pytest -q -m gpu tests/test_gpu_dispatch.py \
    "tests/test_gpu_grouped.py::test_grouped_mm_is_served_by_the_kernel_across_routings" \
    "tests/test_gpu_grouped.py::test_bench_a_tiny_grouped_suite_on_the_gpu" >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR" "$out/gpu-tests.txt" | cut -c1-200 | head -10 >&2
