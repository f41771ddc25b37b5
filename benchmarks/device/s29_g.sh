#!/usr/bin/env bash
# Session 29, an H200: the ResNet-50 b128 dgrad problems the H200 file lacks (12 pointwise layers and the last 3x3
# layer, benchmarks/shapes-conv-resnet50-dgrad.json; their H100 records serve the H200 as a sibling's) tuned at 6
# trials from the priors into a fresh database, merged on the machine into the shipped H200 file (holding calls c and
# f's records); then a ResNet-50 b128 training step against torch with cudnn.benchmark. One archive back.
#   bash benchmarks/device/s29_g.sh OUT    (about 6 minutes; exits 3 on any GPU but an H200)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
case "$gpu" in *H200*) ;; *) echo "not an H200: nothing run" >&2; exit 3;; esac
db=$k/tuned.sqlite
timeout 230 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv-resnet50-dgrad.json --trials 6 --db "$db" \
  --json "$k/tune-dgrad.json" >"$k/tune.txt" 2>>"$k/log.txt"
stamp "tune: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H200.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 170 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 --stem ours 2>>"$k/log.txt" \
  | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'stem': 'ours', 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'convs': r['convs_swapped'], 'err': r['grad_rel_err_max'], 'vs32': r['grad_rel_err_vs_fp32'], 'stats': r['stats_after']}))" >>"$k/train.jsonl"
stamp "resnet50 train: $(tail -1 "$k/train.jsonl" | cut -c1-160)"
(cd "$out" && tar czf s29g.tar.gz keep/ && rm -rf user.sqlite*)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
