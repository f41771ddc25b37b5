#!/usr/bin/env bash
# Session 15, part A (one H200): the decode GEMV family (hopper_gemv): its GPU tests, then an
# off-line tune of Llama-3-8B's decode GEMMs (batch 1, 4, 8, 16) under --family hopper_gemv into
# OUT/gemv.sqlite.
#   bash benchmarks/device/s15_a.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
export AUTOCUTLASS_GEMV_KERNELS=1
timeout 240 python -m pytest -q -m gpu tests/test_gpu_gemv.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
only=()
for b in 1 4 8 16; do for w in q kv gateup down lmhead qkv; do only+=(--only "llama8b-$w-decode$b"); done; done
timeout 330 python -m autocutlass.cli tune --shapes benchmarks/shapes-llama-decode.json "${only[@]}" \
    --family hopper_gemv --trials 20 --timeout 12 --db "$out/gemv.sqlite" --json "$out/tune.json" >"$out/tune.txt" 2>&1
stamp "tune: rc $? $(tail -30 "$out/tune.txt" | cut -c1-200)"
