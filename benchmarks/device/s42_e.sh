#!/usr/bin/env bash
# Session 42, call e (H100; call d was taken back mid-run): the stem's forward and wgrad re-tuned under the slot-assembling unfold kernel (the
# shipped H100 file still holds session 28's "gather" records; 24 trials each, as session 37 did on an H200),
# merged on the machine into the shipped H100 file; then the stem's three directions benched from it (policy
# cached, each cuDNN mode on a thread of its own). Worst case about 170 s.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
db=$k/tuned.sqlite
for spec in "rn50-stem/wgrad:hopper_conv_wgrad_unfold:60" "rn50-stem:hopper_conv_unfold:40"; do
  name=${spec%%:*}; rest=${spec#*:}; fam=${rest%%:*}; limit=${rest##*:}
  timeout $limit python -m autocutlass.cli tune --shapes $C --only "$name" --trials 24 --family "$fam" --db "$db" \
    --json "$k/tune-${name//\//_}.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  echo "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$OUT/merged.sqlite" >"$k/merge.txt" 2>&1
echo "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$OUT/merged.sqlite" "$ship"
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 60 python -m autocutlass.cli bench --shapes $C --only rn50-stem --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-stem" >"$k/bench-stem.txt" 2>>"$k/log.txt"
echo "bench stem: rc $?"
rm -f "$OUT"/user.sqlite*
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-220
grep -hE "rn50-stem" "$k"/bench-*.txt | cut -c1-200
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s42e.tar.gz keep/ && rm -rf keep)
