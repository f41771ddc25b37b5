#!/usr/bin/env bash
# Session 12, part D (~8 min): a 2-layer Llama-3-8B with its MLPs swapped for GatedMLP (stalls and
# steady state under tune), then a profiled ResNet-50 b128 training step (where ours loses).
set -u
out=${1:?OUT}; w=$out/d; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_POLICY=cached AUTOCUTLASS_DB=/tmp/user.sqlite timeout 200 python benchmarks/probes/conv_train_probe.py \
    --models resnet50 --batch 128 --rounds 3 --steps 2 --profile 25 --json "$w/rn50-b128-train.json" >"$w/rn50-b128-train.log" 2>&1
stamp "rn50 b128 train: $(grep -vE '^\[I |^ *[\"{}\[]' "$w/rn50-b128-train.log" | cut -c1-220 | tail -60)"
timeout 330 python benchmarks/probes/llama_stall_probe.py --policies tune --gated-mlp --shipped \
    --decode-batches 1,8 --json "$w/llama-gated.json" >"$w/llama-gated.log" 2>&1
stamp "llama (gated MLPs, tune): rc $? $(grep -v '^\[I ' "$w/llama-gated.log" | tail -6)"
stamp done
