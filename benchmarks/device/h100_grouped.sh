#!/usr/bin/env bash
# Session 10: tune the grouped-GEMM suite on this GPU (an H100) into OUT/grouped.sqlite, then bench
# it from that database (policy cached) against torch._grouped_mm and a per-expert loop.
#   bash benchmarks/device/h100_grouped.sh OUT [TRIALS] [SECONDS_PER_PROBLEM]
set -u
out=${1:?OUT}; trials=${2:-24}; per=${3:-12}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
export AUTOCUTLASS_GROUPED_KERNELS=1
timeout 330 python -m autocutlass.cli tune --shapes benchmarks/shapes-grouped.json --trials "$trials" --timeout "$per" \
    --db "$out/grouped.sqlite" --json "$out/grouped-tune.json" >"$out/grouped-tune.log" 2>&1
stamp "tune: rc $? $(grep -v '^\[I ' "$out/grouped-tune.log" | grep -v 'trials/s' | tail -28)"
AUTOCUTLASS_DB=$out/grouped.sqlite timeout 220 python -m autocutlass.cli bench --shapes benchmarks/shapes-grouped.json \
    --policy cached --no-first-call --rounds 3 --out "$out/bench-grouped" >"$out/bench-grouped.log" 2>&1
stamp "bench: rc $? $(grep -v '^\[I ' "$out/bench-grouped.log" | tail -34)"
