#!/usr/bin/env bash
# Session 35, call d: the strided dgrad family with its phases launched side by side (side streams, the
# GPU's clusters shared out by work). 1. its GPU tests and the split determinism test; 2. four strided
# dgrad shapes of benchmarks/shapes-conv-strided-dgrad.json tuned into a fresh database (8 trials each);
# 3. all ten shapes benched against cuDNN with that database, AUTOCUTLASS_CONV_DGRAD_STRIDED=1.
#   bash benchmarks/device/s35_d.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_CONV_DGRAD_STRIDED=1
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv_backward.py -k "strided or split_reductions" \
  >"$k/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
db=$k/tuned.sqlite
shapes=benchmarks/shapes-conv-strided-dgrad.json
for name in rn50-l2-3x3-s2 rn50-b128-l3-3x3-s2 rn50-b128-l4-3x3-s2 sd15-down-640@32; do
  timeout 45 python -m autocutlass.cli tune --shapes $shapes --only "$name/dgrad" --trials 8 --db "$db" \
    --json "$k/tune-$name.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
cp "$db" "$out/user.sqlite"
AUTOCUTLASS_DB=$out/user.sqlite timeout 60 python -m autocutlass.cli bench --shapes $shapes --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-strided" >"$k/bench-strided.txt" 2>>"$k/log.txt"
stamp "bench: rc $? $(grep geomean "$k/bench-strided.txt" | cut -c1-150)"
rm -f "$out/user.sqlite"
(cd "$out" && tar czf s35d.tar.gz keep/)
grep -E "passed|failed|Error" "$k/gpu-tests.txt" | tail -5 | cut -c1-200
grep -v "^case\|^tuned on" "$k/tune.txt" | cut -c1-200
grep -v "^hit-path" "$k/bench-strided.txt" | cut -c1-175
