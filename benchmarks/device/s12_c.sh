#!/usr/bin/env bash
# Session 12, part C (~8 min): the gated family's GPU tests (one test problem fixed: a column-major
# A of 257 rows is not 16-byte aligned), then the gated MLP benchmark.   bash s12_c.sh OUT
set -u
out=${1:?OUT}; w=$out/c; mkdir -p "$w"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=/tmp/tests.sqlite timeout 150 python -m pytest -q -p no:warnings -m gpu -n 8 tests/test_gpu_gated.py \
    >"$w/gpu-tests-gated.txt" 2>&1
rc=$?
stamp "gated gpu tests: rc $rc $(tail -1 "$w/gpu-tests-gated.txt")"
grep -E "^(FAILED|ERROR)" "$w/gpu-tests-gated.txt" | cut -c1-300 | head -20 >&2
AUTOCUTLASS_DB=/tmp/gated.sqlite timeout 400 python benchmarks/probes/gated_mlp_bench.py --trials 12 --rounds 5 \
    --cases l8b@8192,l8b@64,l8b@1,l70b@8192 --json "$w/gated-mlp.json" >"$w/gated-mlp.log" 2>&1
stamp "gated mlp: rc $? $(grep -v '^\[I ' "$w/gated-mlp.log" | tail -9)"
stamp done
