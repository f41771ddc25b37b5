#!/usr/bin/env bash
# Session 14, part D (one H200, ~4 min): the packed GPU tests (no_grad and inference_mode), then
# where an eager Llama decode step spends its host time with gated MLPs and packed q/k/v, ours vs
# torch (per module class, cProfile), from the shipped databases (policy cached).
#   bash benchmarks/device/s14_d.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 200 python -m pytest -q -m gpu tests/test_gpu_packed.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
AUTOCUTLASS_POLICY=cached timeout 250 python benchmarks/probes/llama_decode_host_probe.py --gated-mlp --qkv \
    --json "$out/decode-host.json" >"$out/decode-host.txt" 2>&1
stamp "decode host: rc $? $(grep -E 'host us per|decode step|one step' "$out/decode-host.txt" | cut -c1-160)"
