#!/usr/bin/env bash
# Session 35, call b: the strided dgrad family with the staged scatter store (store TMA) and the
# shape-generic runner. 1. its GPU tests, the split determinism test (two strided cases) and the
# training-step tests; 2. six strided dgrad shapes of benchmarks/shapes-conv-strided-dgrad.json tuned
# into a fresh database (8 trials each from the seeds, vendor verdicts in the finals); 3. all ten
# shapes benched against cuDNN (benchmark and default modes) with that database.
#   bash benchmarks/device/s35_b.sh OUT    (about 9 minutes; CALL=c names the archive s35c.tar.gz)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv_backward.py \
  -k "strided or convnet_training or split_reductions" >"$k/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
db=$k/tuned.sqlite
shapes=benchmarks/shapes-conv-strided-dgrad.json
for name in rn50-l2-3x3-s2 rn50-b128-l2-3x3-s2 rn50-b128-l3-3x3-s2 rn50-b128-l4-3x3-s2 rn50-b128-l3-down sd15-down-640@32; do
  timeout 52 python -m autocutlass.cli tune --shapes $shapes --only "$name/dgrad" --trials 8 --db "$db" \
    --json "$k/tune-$name.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
cp "$db" "$out/user.sqlite"
AUTOCUTLASS_DB=$out/user.sqlite timeout 100 python -m autocutlass.cli bench --shapes $shapes --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-strided" >"$k/bench-strided.txt" 2>>"$k/log.txt"
stamp "bench: rc $? $(grep geomean "$k/bench-strided.txt" | cut -c1-150)"
rm -f "$out/user.sqlite"
(cd "$out" && tar czf "s35${CALL:-b}.tar.gz" keep/)
grep -E "passed|failed|Error" "$k/gpu-tests.txt" | tail -5 | cut -c1-200
grep -v "^case\|^tuned on" "$k/tune.txt" | cut -c1-200
grep -v "^hit-path" "$k/bench-strided.txt" | cut -c1-175
