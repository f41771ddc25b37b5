#!/usr/bin/env bash
# Session 26, call 5 (an H100): longer searches for the cases still below the vendor: the public GEMM
# suite's large GEMMs below x0.99 (square-4k, llama8b-o, llama8b-qkv, llama8b-down; 48 trials) and the
# conv suite's large wgrad layers below cuDNN (40 trials), into a fresh database OUT/tuned.sqlite.
#   bash benchmarks/device/s26_d.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off
db=$out/tuned.sqlite
timeout 200 python -m autocutlass.cli tune --shapes benchmarks/shapes.json --only square-4k --only llama8b-o \
  --only llama8b-qkv --only llama8b-down --trials 48 --db "$db" --json "$out/tune-gemm.json" >"$out/tune.txt" 2>"$out/log.txt"
stamp "tune gemm: rc $?"
timeout 340 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --family hopper_conv_wgrad \
  --only sd-640@32/wgrad --only sd-1280@16/wgrad --only sdxl-640@64/wgrad --only vae-512@128/wgrad \
  --only rn50-l4-3x3-b256/wgrad --only sd-320@64/wgrad --trials 40 --db "$db" --json "$out/tune-wgrad.json" \
  >>"$out/tune.txt" 2>>"$out/log.txt"
stamp "tune wgrad: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
grep -E "^(square|llama|sd|vae|rn50)" "$out/tune.txt" | cut -c1-170
