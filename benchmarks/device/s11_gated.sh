#!/usr/bin/env bash
# Session 11's gated-MLP checks (prepared without device time; about 12 minutes on one GPU):
# 1. tests/test_gpu_gated.py: the hopper_gemm_gated kernels against the float32 reference over
#    tiles, schedules, stores, split-K, stream-K, swap_ab, and linear(..., mul=) served by them;
# 2. benchmarks/probes/gated_mlp_bench.py: Llama-3-8B / 70B MLPs, GatedMLP vs torch's unfused MLP;
# 3. a 2-layer Llama-3-8B with its MLPs swapped (llama_stall_probe.py --gated-mlp): stalls and steady state.
# If 1 fails, the family stays gated (AUTOCUTLASS_GATED_KERNELS) and 2-3 are skipped.
#   bash benchmarks/device/s11_gated.sh OUT
set -u
out=${1:?OUT}; w=$(mktemp -d); mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=$w/tests.sqlite timeout 240 python -m pytest -q -p no:warnings -m gpu -n 8 tests/test_gpu_gated.py \
    >"$w/gpu-tests-gated.txt" 2>&1
rc=$?
stamp "gated gpu tests: rc $rc $(tail -1 "$w/gpu-tests-gated.txt")"
grep -E "^(FAILED|ERROR)|Error" "$w/gpu-tests-gated.txt" | head -20 >&2
if [ $rc -eq 0 ]; then
    AUTOCUTLASS_DB=$w/gated.sqlite timeout 330 python benchmarks/probes/gated_mlp_bench.py --trials 12 --rounds 5 \
        --cases l8b@8192,l8b@64,l8b@1,l70b@8192 --json "$w/gated-mlp.json" >"$w/gated-mlp.log" 2>&1
    stamp "gated mlp: rc $? $(tail -7 "$w/gated-mlp.log")"
    timeout 280 python benchmarks/probes/llama_stall_probe.py --policies tune --gated-mlp --shipped \
        --decode-batches 1,8 --json "$w/llama-gated.json" >"$w/llama-gated.log" 2>&1
    stamp "llama (gated MLPs, tune): rc $? $(tail -3 "$w/llama-gated.log")"
fi
tar czf "$out/s11-gated.tgz" -C "$w" --exclude='*.sqlite*' .
stamp done
