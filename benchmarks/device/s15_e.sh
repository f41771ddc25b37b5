#!/usr/bin/env bash
# Session 15, part E (one GPU): Llama-3-8B's decode GEMMs (batch 1, 4, 8, 16) side by side with torch
# (read flush, policy cached, the shipped databases with their hopper_gemv records), then the Llama
# stall / steady-state probe (2 layers, gated MLP, packed q/k/v, policy background, shipped DBs).
#   bash benchmarks/device/s15_e.sh OUT [--no-llama]
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
only=()
for b in 1 4 8 16; do for w in q kv gateup down lmhead qkv; do only+=(--only "llama8b-$w-decode$b"); done; done
AUTOCUTLASS_DB=$(mktemp -d)/user.sqlite timeout 300 python -m autocutlass.cli bench --shapes benchmarks/shapes-llama-decode.json \
    "${only[@]}" --policy cached --flush read --no-first-call --rounds 7 --out "$out/bench" >"$out/bench.txt" 2>&1
stamp "bench: rc $? $(tail -34 "$out/bench.txt" | cut -c1-200)"
[ "${2:-}" = "--no-llama" ] && exit 0
timeout 280 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp --qkv \
    --rounds 21 --reps 5 --json "$out/llama.json" >"$out/llama.txt" 2>&1
stamp "llama: rc $? $(tail -3 "$out/llama.txt" | cut -c1-250)"
