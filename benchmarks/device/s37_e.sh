#!/usr/bin/env bash
# Session 37, call e (H200): the slot-assembling unfold kernel (commit ac752cc). The unfold family's GPU tests
# (both unfold kernels, every geometry, 16-byte and 64-channel C'); the stem's forward and wgrad tuned under the
# new source (24 trials each, the space offers only 'slots'), merged on the machine into the shipped file; the
# stem's forward and wgrad kernel by kernel (config_probe --kernels) against cuDNN.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
timeout 260 python -m pytest -q -m gpu tests/test_gpu_conv_unfold.py >"$k/tests.txt" 2>&1
echo "tests: rc $? $(tail -1 "$k/tests.txt")"
db=$k/tuned.sqlite
for spec in "rn50-stem/wgrad:hopper_conv_wgrad_unfold" "rn50-stem:hopper_conv_unfold"; do
  name=${spec%%:*}; fam=${spec##*:}
  timeout 80 python -m autocutlass.cli tune --shapes $C --only "$name" --trials 24 --family "$fam" --db "$db" \
    --json "$k/tune-${name//\//_}.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  echo "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H200.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$OUT/merged.sqlite" >"$k/merge.txt" 2>&1
echo "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$OUT/merged.sqlite" "$ship"
timeout 60 python benchmarks/probes/config_probe.py --db "$ship" --workers 15 --rounds 5 --kernels 20 \
  --case $C:rn50-stem/wgrad --case $C:rn50-stem/fprop --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "passed|failed|FAILED" "$k/tests.txt" | tail -3 | cut -c1-200
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-220
grep -E "us  vendor|NOT VER|failed|kernels:" "$k/probe.txt" | cut -c1-300
(cd "$OUT" && tar czf s37e.tar.gz keep/ && rm -rf keep)
