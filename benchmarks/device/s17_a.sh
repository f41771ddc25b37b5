#!/usr/bin/env bash
# Session 17's first GPU call: the grouped kernel with clusters of two (GPU tests of the family,
# then the probe timing it against torch._grouped_mm and the dense GEMM on Mixtral-sized experts),
# then session 16's MoE check (transformers' Qwen3-MoE block, experts 'autocutlass' vs
# 'grouped_mm', grouped kernels off and on). The rest of session 16's GPU tests: s17_b.sh.
#   bash benchmarks/device/s17_a.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >&2
timeout 280 python -m pytest -q -m gpu tests/test_gpu_grouped.py >"$out/gpu-tests-grouped.txt" 2>&1
stamp "grouped gpu tests: rc $? $(tail -1 "$out/gpu-tests-grouped.txt" | cut -c1-200)"
grep -E "^FAILED|Error" "$out/gpu-tests-grouped.txt" | head -8 >&2
timeout 170 python benchmarks/probes/grouped_cluster_probe.py --json "$out/grouped-cluster-probe.json" \
    >"$out/grouped-cluster-probe.txt" 2>&1
stamp "cluster probe: rc $?"
for k in 0 1; do
    AUTOCUTLASS_GROUPED_KERNELS=$k timeout 60 python benchmarks/probes/hf_moe_probe.py --json "$out/hf-moe-k$k.json" \
        >"$out/hf-moe-k$k.txt" 2>&1
    stamp "hf moe (grouped kernels $k): rc $? $(tail -1 "$out/hf-moe-k$k.txt" | cut -c1-250)"
done
grep -E "TF/s|Error|infeasible" "$out/grouped-cluster-probe.txt" >&2
