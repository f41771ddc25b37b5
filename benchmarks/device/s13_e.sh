#!/usr/bin/env bash
# Session 13, part E (~7 min on one H100): a 2-layer Llama-3-8B with GatedMLPs (fused SwiGLU) under
# the background policy from the shipped databases (first calls, steady state), then ResNet-50 b128
# inference from the shipped database with fresh-process first calls.   bash benchmarks/device/s13_e.sh OUT
set -u
out=${1:?OUT}; w=$out/e; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 300 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp --rounds 7 \
    --json "$w/llama-background-gated.json" >"$w/llama-background-gated.txt" 2>&1
stamp "llama background gated-mlp: rc $? $(grep -E '^\| |x[01]\.' "$w/llama-background-gated.txt" | tail -8 | cut -c1-200)"
AUTOCUTLASS_DB=$w/rn50.sqlite timeout 260 python benchmarks/probes/resnet50_e2e.py --first-call --rounds 5 \
    --json "$w/rn50-infer.json" >"$w/rn50-infer.txt" 2>&1
stamp "rn50: rc $? $(grep -v '^\[I ' "$w/rn50-infer.txt" | tail -12 | cut -c1-200)"
stamp done
