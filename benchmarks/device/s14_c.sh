#!/usr/bin/env bash
# Session 14, part C (one H100, ~6 min): issue 21's class shapes (benchmarks/shapes-online.json)
# tuned again at 16 trials into an empty database, with the GEMM seeds that now start with the wave
# model's picks (compare with part A's -tune-classes.json, same protocol, the seeds before); then
# the dispatch, torch-ops and packed GPU tests (the plain torch entry of linear).
#   bash benchmarks/device/s14_c.sh OUT
set -u
out=${1:?OUT}; w=/tmp/s14c; rm -rf "$w"; mkdir -p "$w" "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=$w/classes.sqlite timeout 300 python -m autocutlass.cli tune --shapes benchmarks/shapes-online.json \
    --trials 16 --timeout 12 --json "$out/tune-classes-model.json" >"$out/tune-classes-model.log" 2>&1
stamp "class tune: rc $? $(grep -vE '^\[I ' "$out/tune-classes-model.log" | tail -13 | cut -c1-190)"
python -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$w/classes.sqlite"
cp "$w/classes.sqlite" "$out/classes-model.sqlite"
[ -n "${SKIP_TESTS:-}" ] && exit 0
timeout 270 python -m pytest -q -m gpu tests/test_gpu_dispatch.py tests/test_gpu_torch_ops.py tests/test_gpu_packed.py \
    >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -2 "$out/gpu-tests.txt" | cut -c1-200)"
