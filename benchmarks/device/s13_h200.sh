#!/usr/bin/env bash
# Session 13 on one H200 (~8 min): cold start (warm database, warm and empty kernel caches), the
# public GEMM suite from the shipped H200 database, and a 2-layer Llama-3-8B with fused-SwiGLU
# GatedMLPs under the background policy from the shipped databases.   bash benchmarks/device/s13_h200.sh OUT
set -u
out=${1:?OUT}; w=$out/h200; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 200 python benchmarks/probes/cold_start.py --cases square,decode --repeats 3 --json "$w/cold-start.json" \
    >"$w/cold-start.txt" 2>&1
stamp "cold start: rc $? $(grep -v '^\[I ' "$w/cold-start.txt" | tail -14 | cut -c1-200)"
AUTOCUTLASS_DB=/tmp/empty.sqlite timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes.json \
    --policy cached --no-first-call --rounds 3 --out "$w/bench-shipped" >"$w/bench-shipped.log" 2>&1
stamp "gemm suite from the shipped db: rc $? $(grep -v '^\[I ' "$w/bench-shipped.log" | tail -18 | cut -c1-200)"
timeout 220 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp --rounds 7 \
    --json "$w/llama-background-gated.json" >"$w/llama-background-gated.txt" 2>&1
stamp "llama background gated-mlp: rc $? $(grep -E '^\| |x[01]\.' "$w/llama-background-gated.txt" | tail -8 | cut -c1-200)"
stamp done
