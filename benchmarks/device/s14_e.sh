#!/usr/bin/env bash
# Session 14, part E (one H200, ~6 min): the per-module hit caches (autocutlass.nn.hits): GPU tests
# of dispatch, torch-ops, packed q/k/v and SwiGLU; the decode host-time probe (gated MLP + packed
# q/k/v, policy cached, shipped databases); the Llama stall/steady-state probe with packed q/k/v.
#   bash benchmarks/device/s14_e.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 280 python -m pytest -q -m gpu tests/test_gpu_dispatch.py tests/test_gpu_torch_ops.py tests/test_gpu_packed.py \
    tests/test_gpu_swiglu.py tests/test_gpu_gated.py -k "not kernel_matches" >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
AUTOCUTLASS_POLICY=cached timeout 200 python benchmarks/probes/llama_decode_host_probe.py --gated-mlp --qkv \
    --json "$out/decode-host.json" >"$out/decode-host.txt" 2>&1
stamp "decode host: rc $? $(grep -E 'host us per|decode step|one step' "$out/decode-host.txt" | cut -c1-160)"
timeout 250 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp --qkv \
    --rounds 21 --reps 5 --json "$out/llama-qkv.json" >"$out/llama-qkv.txt" 2>&1
stamp "llama qkv: rc $? $(tail -2 "$out/llama-qkv.txt" | cut -c1-250)"
