#!/usr/bin/env bash
# Session 15, part B (one GPU): GPU tests of hopper_gemv and of dispatch (the faster of two
# families' records serves), then Llama-3-8B's decode GEMMs (batch 1, 4, 8) benchmarked side by
# side with torch (read flush, policy cached, shipped databases with the hopper_gemv records).
#   bash benchmarks/device/s15_b.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 260 python -m pytest -q -m gpu tests/test_gpu_gemv.py tests/test_gpu_dispatch.py tests/test_gpu_packed.py \
    >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
only=()
for b in 1 4 8; do for w in q kv gateup down lmhead qkv; do only+=(--only "llama8b-$w-decode$b"); done; done
export AUTOCUTLASS_DB=$(mktemp -d)/user.sqlite
timeout 300 python -m autocutlass.cli bench --shapes benchmarks/shapes-llama-decode.json "${only[@]}" --policy cached \
    --flush read --no-first-call --rounds 7 --out "$out/bench" >"$out/bench.txt" 2>&1
stamp "bench: rc $? $(tail -28 "$out/bench.txt" | cut -c1-220)"
