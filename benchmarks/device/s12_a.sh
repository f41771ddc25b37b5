#!/usr/bin/env bash
# Session 12, part A (~8 min on one H100): the GPU tests session 11 wrote and never ran (grouped
# tail zeroing and torch path, conv backward, the gated family), then the grouped suite on the
# torch path against a bare torch._grouped_mm.   bash benchmarks/device/s12_a.sh OUT
set -u
out=${1:?OUT}; w=$out/a; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=/tmp/tests.sqlite timeout 330 python -m pytest -q -p no:warnings -m gpu -n 12 \
    tests/test_gpu_grouped.py tests/test_gpu_conv_backward.py tests/test_gpu_gated.py \
    >"$w/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$w/gpu-tests.txt")"
grep -E "^(FAILED|ERROR)" "$w/gpu-tests.txt" | head -30 >&2
AUTOCUTLASS_DB=/tmp/empty.sqlite AUTOCUTLASS_SHIPPED_DBS=off timeout 170 python -m autocutlass.cli bench \
    --shapes benchmarks/shapes-grouped.json --policy cached --no-first-call --rounds 3 \
    --out "$w/bench-grouped-torch-path" >"$w/bench-grouped-torch-path.log" 2>&1
stamp "grouped torch path: rc $? $(grep -v '^\[I ' "$w/bench-grouped-torch-path.log" | tail -30)"
stamp done
