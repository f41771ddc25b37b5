#!/usr/bin/env bash
# Session 15, part C (one GPU): the Llama stall / steady-state probe (2 layers, gated MLP, packed
# q/k/v, policy background, shipped databases, which now hold hopper_gemv records).
#   bash benchmarks/device/s15_c.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 330 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp --qkv \
    --rounds 21 --reps 5 --json "$out/llama.json" >"$out/llama.txt" 2>&1
stamp "llama: rc $? $(tail -4 "$out/llama.txt" | cut -c1-250)"
