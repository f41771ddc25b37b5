#!/usr/bin/env bash
# Session 13, part B (~8 min on one H100): the GEMM hit path's direct launch measured in an eager
# Llama-3-8B decode step (host time per Linear in the model, ours vs torch), a 2-layer Llama's
# first calls and steady state under the background policy with the shipped databases, and the
# Qwen3-MoE block with our grouped kernels tuned on its own shapes.   bash benchmarks/device/s13_b.sh OUT
set -u
out=${1:?OUT}; w=$out/b; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_POLICY=cached timeout 100 python benchmarks/probes/llama_decode_host_probe.py --batch 1 --profile 30 \
    --json "$w/decode-host-b1.json" >"$w/decode-host-b1.txt" 2>&1
stamp "decode host: rc $? $(grep -E '^(one step|decode step|host us|o_proj)' "$w/decode-host-b1.txt")"
timeout 300 python benchmarks/probes/llama_stall_probe.py --policies background --shipped \
    --json "$w/llama-stall-background.json" >"$w/llama-stall-background.txt" 2>&1
stamp "llama background: rc $? $(tail -25 "$w/llama-stall-background.txt" | cut -c1-200)"
AUTOCUTLASS_GROUPED_KERNELS=1 AUTOCUTLASS_POLICY=tune AUTOCUTLASS_DB=$w/moe.sqlite AUTOCUTLASS_TUNE_TRIALS=24 \
    timeout 200 python benchmarks/probes/moe_block_bench.py --json "$w/moe-block-tuned.json" >"$w/moe-block-tuned.txt" 2>&1
stamp "moe block, grouped kernels tuned on its shapes: rc $? $(grep -v '^\[I ' "$w/moe-block-tuned.txt" | tail -15 | cut -c1-200)"
stamp done
