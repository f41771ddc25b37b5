#!/usr/bin/env bash
# Session 15, part D (one GPU): hopper_gemv with its tensor-core kernel (kind "mma"): GPU tests,
# then an off-line tune of Llama-3-8B's decode GEMMs (batch 1, 4, 8, 16) under --family hopper_gemv
# into OUT/gemv.sqlite, merged into this GPU's shipped database (OUT/shipped/).
#   bash benchmarks/device/s15_d.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
timeout 150 python -m pytest -q -m gpu tests/test_gpu_gemv.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
only=()
for b in 1 4 8 16; do for w in q kv gateup down lmhead qkv; do only+=(--only "llama8b-$w-decode$b"); done; done
timeout 380 python -m autocutlass.cli tune --shapes benchmarks/shapes-llama-decode.json "${only[@]}" \
    --family hopper_gemv --trials 24 --timeout 12 --db "$out/gemv.sqlite" --json "$out/tune.json" >"$out/tune.txt" 2>&1
stamp "tune: rc $? $(tail -26 "$out/tune.txt" | cut -c1-150)"
gpu=$(python -c "import torch; print(torch.cuda.get_device_name().replace(' ', '-'))")
python -c "import sqlite3; sqlite3.connect('$out/gemv.sqlite').execute('PRAGMA wal_checkpoint(TRUNCATE)')"
python -m autocutlass.cli db merge "tuning_dbs/$gpu.sqlite" "$out/gemv.sqlite" -o /tmp/merged.sqlite >&2 \
  && python -m autocutlass.cli tune --export-shipped "$out/shipped" --db /tmp/merged.sqlite >&2
rm -f "$out"/gemv.sqlite-*
