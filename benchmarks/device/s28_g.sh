#!/usr/bin/env bash
# Session 28, call 8 (an H100): the rest of the conv suite's 3x3 wgrad layers tuned at 24 trials with the tiles
# across the taps in the space (fresh database), merged on the machine into the shipped H100 file (the wgrad records
# carried to the new sources by db rekey, call f's re-tunes merged, replaced records pruned); then, as a user gets
# that file (policy cached): the conv suite's wgrad against cuDNN and a ResNet-50 b128 training step. One archive.
#   bash benchmarks/device/s28_g.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
db=$k/tuned.sqlite
for name in rn50-l2-3x3 rn50-l2-3x3-s2 rn50-l3-3x3 rn50-l3-3x3-b128 rn50-l4-3x3 rn50-l4-3x3-b256; do
  AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off timeout 100 python -m autocutlass.cli tune \
    --shapes benchmarks/shapes-conv.json --only "$name/wgrad" --trials 24 --db "$db" \
    --json "$k/tune-$name.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 120 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/wgrad" --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-wgrad" >"$k/bench-wgrad.txt" 2>>"$k/log.txt"
stamp "bench wgrad: rc $? $(grep geomean "$k/bench-wgrad.txt" | cut -c1-150)"
timeout 100 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 --stem ours 2>>"$k/log.txt" \
  | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'stem': 'ours', 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'convs': r['convs_swapped'], 'err': r['grad_rel_err_max'], 'stats': r['stats_after']}))" >>"$k/train.jsonl"
stamp "resnet50 train: $(tail -1 "$k/train.jsonl" | cut -c1-160)"
(cd "$out" && tar czf s28g.tar.gz keep/)
grep -E "wgrad" "$k/tune.txt" | grep -v "^case" | grep -v trials, | cut -c1-220
grep -E "geomean|/wgrad" "$k/bench-wgrad.txt" | cut -c1-200
