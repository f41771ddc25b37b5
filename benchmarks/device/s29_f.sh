#!/usr/bin/env bash
# Session 29, an H200: the suite's two pointwise wgrad layers under hopper_conv_wgrad (the H200 file held only
# hopper_gemm records of them; the search starts from the H100 file's hopper_conv_wgrad records as a sibling's), into
# a fresh database merged on the machine into the shipped H200 file (already holding call c's records); then, as a
# user gets that file (policy cached), the conv suite's wgrad against cuDNN and a ResNet-50 b128 training step.
#   bash benchmarks/device/s29_f.sh OUT    (about 5 minutes; exits 3 on any GPU but an H200)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
case "$gpu" in *H200*) ;; *) echo "not an H200: nothing run" >&2; exit 3;; esac
db=$k/tuned.sqlite
for name in rn50-l1-1x1-up rn50-l3-1x1; do
  timeout 80 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --only "$name/wgrad" \
    --family hopper_conv_wgrad --trials 20 --db "$db" --json "$k/tune-$name.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H200.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 120 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/wgrad" --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-wgrad" >"$k/bench-wgrad.txt" 2>>"$k/log.txt"
stamp "bench wgrad: rc $? $(grep geomean "$k/bench-wgrad.txt" | cut -c1-150)"
timeout 150 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 --stem ours 2>>"$k/log.txt" \
  | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'stem': 'ours', 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'convs': r['convs_swapped'], 'err': r['grad_rel_err_max'], 'stats': r['stats_after']}))" >>"$k/train.jsonl"
stamp "resnet50 train: $(tail -1 "$k/train.jsonl" | cut -c1-160)"
(cd "$out" && tar czf s29f.tar.gz keep/ && rm -rf user.sqlite*)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
grep -E "geomean|1x1" "$k/bench-wgrad.txt" | cut -c1-200
