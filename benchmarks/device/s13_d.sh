#!/usr/bin/env bash
# Session 13, part D (~9 min on one H100): the gated MLP benchmark (fused SwiGLU, gated path, torch
# unfused), then Llama-3-8B's decode GEMMs tuned for the shipped database.
#   bash benchmarks/device/s13_d.sh OUT [CASES]
set -u
out=${1:?OUT}; cases=${2:-l8b@8192,l70b@8192,l8b@1,l8b@64}; w=$out/d; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=$w/mlp.sqlite timeout 300 python benchmarks/probes/gated_mlp_bench.py --trials 12 --rounds 5 \
    --cases "$cases" --json "$w/gated-mlp.json" >"$w/gated-mlp.txt" 2>&1
stamp "gated mlp: rc $? $(grep -v '^\[I ' "$w/gated-mlp.txt" | tail -16 | cut -c1-220)"
AUTOCUTLASS_DB=$w/llama-decode.sqlite timeout 260 python -m autocutlass.cli tune --shapes benchmarks/shapes-llama-decode.json \
    --trials 16 --timeout 12 --json "$w/tune-llama-decode.json" >"$w/tune-llama-decode.log" 2>&1
stamp "llama decode tune: rc $? $(grep -vE '^\[I ' "$w/tune-llama-decode.log" | tail -24 | cut -c1-190)"
stamp done
