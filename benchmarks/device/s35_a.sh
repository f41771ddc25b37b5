#!/usr/bin/env bash
# Session 35, call a: the strided dgrad family (hopper_conv_dgrad_strided). 1. its GPU tests and the
# training-step tests whose strided 3x3 dgrad it now serves (tests/test_gpu_conv_backward.py); 2. the
# strided dgrad shapes (benchmarks/shapes-conv-strided-dgrad.json) tuned into a fresh database, 6 trials
# each from the seeds, with the vendor verdict of the finals; 3. those shapes benched against cuDNN
# (benchmark and default modes) with that database.
#   bash benchmarks/device/s35_a.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 330 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv_backward.py \
  -k "strided or convnet_training or modules_train or split_reductions or nchw" >"$k/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
db=$k/tuned.sqlite
shapes=benchmarks/shapes-conv-strided-dgrad.json
for name in $(python -c "import json; print(' '.join(c['name'] for c in json.load(open('$shapes'))['cases']))"); do
  timeout 40 python -m autocutlass.cli tune --shapes $shapes --only "$name/dgrad" --trials 6 --db "$db" \
    --json "$k/tune-$name.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
cp "$db" "$out/user.sqlite"
AUTOCUTLASS_DB=$out/user.sqlite timeout 100 python -m autocutlass.cli bench --shapes $shapes --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-strided" >"$k/bench-strided.txt" 2>>"$k/log.txt"
stamp "bench: rc $? $(grep geomean "$k/bench-strided.txt" | cut -c1-150)"
(cd "$out" && tar czf s35a.tar.gz keep/)
tail -25 "$k/gpu-tests.txt" | grep -v "^$" | cut -c1-200
grep -v "^hit-path" "$k/bench-strided.txt" | cut -c1-175
