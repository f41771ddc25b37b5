#!/usr/bin/env bash
# Session 24, call 9 (an H200): two Llama-3-8B layers (gated MLP, packed q/k/v, policy background,
# the shipped databases with this session's host-time verdicts): first-call stalls and steady state
# against torch, prefill and decode 1/4/8 (issue 20; session 15 read decode x0.985/0.977/0.967 here).
#   bash benchmarks/device/s24_g.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 300 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp --qkv \
    --rounds 21 --reps 5 --json "$out/llama.json" >"$out/llama.txt" 2>&1
stamp "llama: rc $? $(tail -12 "$out/llama.txt" | cut -c1-250)"
