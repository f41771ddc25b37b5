#!/usr/bin/env bash
# Session 25, call 15 (an H100): the GEMM kernel GPU tests again (s25_i.sh's run stopped at a test
# case whose col-major A had 90-element rows, not 16-byte aligned; now 88), and
# benchmarks/shapes-longk.json's longk-320x640 tuned at 16 trials with the swapped workspace split in
# the space and the seeds, into OUT/tuned.sqlite.
#   bash benchmarks/device/s25_j.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off
timeout 100 python -m autocutlass.cli tune --shapes benchmarks/shapes-longk.json --only longk-320x640 --trials 16 \
  --db "$out/tuned.sqlite" --json "$out/tune.json" >"$out/tune.txt" 2>"$out/log.txt"
stamp "tune: rc $? $(grep longk "$out/tune.txt")"
python -c "import sqlite3; c = sqlite3.connect('$out/tuned.sqlite'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$out/tuned.sqlite-wal" "$out/tuned.sqlite-shm"
AUTOCUTLASS_CACHE_DIR=$(mktemp -d) timeout 300 python -m pytest -q -x tests/test_gpu_kernels.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt")"
grep -E "FAILED|Error" "$out/gpu-tests.txt" | head -5 >&2
