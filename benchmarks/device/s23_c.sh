#!/usr/bin/env bash
# Session 23, after s23_b.sh: fitted widths for K-major B only, model picks in a 2x1 cluster. (1) GPU
# tests: the fitted-width kernel cases (test shapes with 16-byte strides) and the split-K scratch
# under a side stream and a CUDA graph; (2) benchmarks/shapes-fitted.json and
# benchmarks/shapes-online.json (issue 21's classes) tuned at 16 trials into one fresh database
# (OUT/tuned.sqlite), each case's winner against torch.matmul in the tuner's finals. 5 files.
#   bash benchmarks/device/s23_c.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 150 python -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_kernels.py \
    -k "x80x or x112x or x144x or x176x or x240x or follows_the_current_stream" >"$out/tests.txt" 2>&1
stamp "GPU tests: rc $? $(tail -1 "$out/tests.txt" | cut -c1-160)"
grep -E "^(FAILED|ERROR)" "$out/tests.txt" >&2
db="$out/tuned.sqlite"
for f in fitted online; do
  timeout 200 python -m autocutlass.cli tune --shapes "benchmarks/shapes-$f.json" --trials 16 --db "$db" \
      --json "$out/tune-$f.json" >"$out/tune-$f.txt" 2>>"$out/log.txt"
  stamp "tune $f: rc $?"; tail -13 "$out/tune-$f.txt" >&2
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm" "$out/log.txt"
