#!/usr/bin/env bash
# Session 24, call 10 (an H100): issue 20's model and cold-start numbers with today's code on the
# H100: two Llama-3-8B layers (gated MLP, packed q/k/v, policy background, the shipped databases)
# and the cold-start probe (warm database and kernel cache, and empty kernel caches).
#   bash benchmarks/device/s24_h.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 300 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp --qkv \
    --rounds 21 --reps 5 --json "$out/llama.json" 2>&1 | grep -v "^\[I 20" >"$out/llama.txt"
stamp "llama: $(tail -2 "$out/llama.txt" | cut -c1-250)"
timeout 200 python benchmarks/probes/cold_start.py --cases square,decode --repeats 3 --json "$out/cold-start.json" \
    >"$out/cold-start.txt" 2>&1
stamp "cold start: rc $? $(tail -14 "$out/cold-start.txt" | cut -c1-200)"
