#!/usr/bin/env bash
# Session 11's GPU checks (prepared in session 11, which had no device time; run them first in the
# next session, about 13 minutes on one GPU):
# 1. GPU tests of the grouped torch path's tail-zeroing kernel (kernels/tail_zero.py: exact tail,
#    CUDA-graph replay, no masked_fill in autocutlass.grouped_mm's torch path) and the conv
#    backward GPU tests (the eager backward now merges torch-served dgrad + wgrad);
# 2. the grouped suite on the torch path (AUTOCUTLASS_GROUPED_KERNELS unset) against a bare
#    torch._grouped_mm: the served torch path's overhead (was x0.77-0.83 on Mixtral with the fill);
# 3. a ResNet-50 b32 training step on the eager path (was x0.657, session 10);
# 4. autocutlass.prewarm: a fresh process's first tuned call with and without it;
# 5. a Qwen3-MoE block forward (moe_block_bench.py) on torch._grouped_mm vs ours, kernels off and on;
# 6. cold start with empty kernel caches: the shipped compiled kernels (tuning_dbs/kernels) load instead of compiling.
# Everything lands in OUT/s11.tgz.   bash benchmarks/device/s11_checks.sh OUT
set -u
out=${1:?OUT}; w=$(mktemp -d); mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=$w/tests.sqlite timeout 200 python -m pytest -q -p no:warnings -m gpu -n 8 \
    tests/test_gpu_grouped.py -k "tail or torch_path or rows_past" tests/test_gpu_conv_backward.py \
    >"$w/gpu-tests.txt" 2>&1
stamp "gpu tests: $(tail -1 "$w/gpu-tests.txt")"
grep -E "^(FAILED|ERROR)" "$w/gpu-tests.txt" | head -20 >&2
timeout 40 python -m pytest -q -p no:warnings tests/test_conv_backward.py tests/test_grouped_tail.py \
    >"$w/cpu-tests-on-gpu-host.txt" 2>&1
stamp "cpu tests here: $(tail -1 "$w/cpu-tests-on-gpu-host.txt")"
AUTOCUTLASS_DB=$w/empty.sqlite AUTOCUTLASS_SHIPPED_DBS=off timeout 200 python -m autocutlass.cli bench \
    --shapes benchmarks/shapes-grouped.json --policy cached --no-first-call --rounds 3 \
    --out "$w/bench-grouped-torch-path" >"$w/bench-grouped-torch-path.log" 2>&1
stamp "grouped torch path: rc $? $(grep -v '^\[I ' "$w/bench-grouped-torch-path.log" | tail -30)"
AUTOCUTLASS_POLICY=cached AUTOCUTLASS_DB=$w/user.sqlite timeout 100 python benchmarks/probes/conv_train_probe.py \
    --models resnet50 --batch 32 --rounds 2 --steps 2 --json "$w/rn50-train-eager.json" >"$w/rn50-train-eager.log" 2>&1
stamp "rn50 train (eager path): $(grep -E '^resnet50' "$w/rn50-train-eager.log" | cut -c1-400)"
timeout 200 python benchmarks/probes/prewarm_probe.py --size 4096 --idle 8 --repeats 2 \
    --json "$w/prewarm.json" >"$w/prewarm.log" 2>&1
stamp "prewarm: $(tail -1 "$w/prewarm.log")"
timeout 150 python benchmarks/probes/cold_start.py --cases square,decode --repeats 2 \
    --json "$w/cold-start-shipped-kernels.json" >"$w/cold-start-shipped-kernels.log" 2>&1  # cold: shipped objects now
stamp "cold start (cold = empty caches, shipped kernels): $(tail -4 "$w/cold-start-shipped-kernels.log" | tr '\n' ' ' | cut -c1-600)"
for k in 0 1; do  # a Qwen3-MoE block at 4096 tokens: torch path (kernels gated off), then our kernels (shipped records)
    AUTOCUTLASS_GROUPED_KERNELS=$k AUTOCUTLASS_DB=$w/empty.sqlite timeout 120 python benchmarks/probes/moe_block_bench.py \
        --json "$w/moe-block-kernels$k.json" >"$w/moe-block-kernels$k.log" 2>&1
    stamp "moe block (grouped kernels $k): $(tail -1 "$w/moe-block-kernels$k.log")"
done
tar czf "$out/s11.tgz" -C "$w" --exclude='*.sqlite*' .
stamp done
