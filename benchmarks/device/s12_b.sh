#!/usr/bin/env bash
# Session 12, part B (~9 min): cold start with the shipped compiled kernels, the Qwen3-MoE block
# with grouped kernels off and on, ResNet-50 b32 eager training, prewarm.   bash s12_b.sh OUT
set -u
out=${1:?OUT}; w=$out/b; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 150 python benchmarks/probes/cold_start.py --cases square,decode --repeats 2 \
    --json "$w/cold-start-shipped-kernels.json" >"$w/cold-start-shipped-kernels.log" 2>&1
stamp "cold start: $(tail -4 "$w/cold-start-shipped-kernels.log" | tr '\n' ' ' | cut -c1-700)"
for k in 0 1; do
    AUTOCUTLASS_GROUPED_KERNELS=$k AUTOCUTLASS_DB=/tmp/empty$k.sqlite timeout 100 python benchmarks/probes/moe_block_bench.py \
        --json "$w/moe-block-kernels$k.json" >"$w/moe-block-kernels$k.log" 2>&1
    stamp "moe block (grouped kernels $k): $(tail -2 "$w/moe-block-kernels$k.log")"
done
AUTOCUTLASS_POLICY=cached AUTOCUTLASS_DB=/tmp/user.sqlite timeout 100 python benchmarks/probes/conv_train_probe.py \
    --models resnet50 --batch 32 --rounds 2 --steps 2 --json "$w/rn50-train-eager.json" >"$w/rn50-train-eager.log" 2>&1
stamp "rn50 train (eager path): $(grep -E '^resnet50' "$w/rn50-train-eager.log" | cut -c1-400)"
timeout 120 python benchmarks/probes/prewarm_probe.py --size 4096 --idle 8 --repeats 2 \
    --json "$w/prewarm.json" >"$w/prewarm.log" 2>&1
stamp "prewarm: $(tail -2 "$w/prewarm.log")"
stamp done
