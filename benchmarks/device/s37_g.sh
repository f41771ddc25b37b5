#!/usr/bin/env bash
# Session 37, call g (H200): ResNet-50 b128's stem (forward and wgrad) tuned under the slot-assembling unfold
# kernel (24 trials each), merged on the machine into the shipped file, then both beside cuDNN kernel by kernel.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
R=benchmarks/shapes-conv-resnet50.json
db=$k/tuned.sqlite
for spec in "rn50-b128-stem/wgrad:hopper_conv_wgrad_unfold" "rn50-b128-stem:hopper_conv_unfold"; do
  name=${spec%%:*}; fam=${spec##*:}
  timeout 110 python -m autocutlass.cli tune --shapes $R --only "$name" --trials 24 --family "$fam" --db "$db" \
    --json "$k/tune-${name//\//_}.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  echo "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H200.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$OUT/merged.sqlite" >"$k/merge.txt" 2>&1
echo "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$OUT/merged.sqlite" "$ship"
timeout 90 python benchmarks/probes/config_probe.py --db "$ship" --workers 15 --rounds 5 --kernels 10 \
  --case $R:rn50-b128-stem/wgrad --case $R:rn50-b128-stem/fprop --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "rn50" "$k/tune.txt" | grep -v skipped | cut -c1-220
grep -E "us  vendor|NOT VER|failed|kernels:" "$k/probe.txt" | cut -c1-300
(cd "$OUT" && tar czf s37g.tar.gz keep/ && rm -rf keep)
