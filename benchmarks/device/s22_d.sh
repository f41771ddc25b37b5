#!/usr/bin/env bash
# Session 22 (H100): (1) host microseconds per call of each ResNet-50 b128 conv direction, our entry
# (its launches apart) against torch's call (conv_entry_host_probe.py); (2) ResNet-50 b128 training,
# mixed sites (our forward, torch's backward) kept on our forward ('ours', the library's default)
# against run as F.conv2d ('torch'), alternating processes, 3 pairs; (3) the UNet-style stack b8,
# one pair. Shipped database copied to OUT/db.sqlite (host-aware verdicts since s22_a).
#   bash benchmarks/device/s22_d.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$out/db.sqlite
cp "tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite" "$db" || exit 3
AUTOCUTLASS_DB="$db" timeout 200 python benchmarks/probes/conv_entry_host_probe.py --reps 5 --json "$out/entry.json" \
    >"$out/entry.txt" 2>>"$out/log.txt"
stamp "entry host probe: rc $?"
tail -64 "$out/entry.txt" | grep -v '^{' >&2
run() {  # model, mixed rule, pair index
  AUTOCUTLASS_DB="$db" timeout 90 python benchmarks/probes/conv_train_probe.py --models "$1" --rounds 7 --mixed-sites "$2" \
    2>>"$out/log.txt" | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['$1']; print(json.dumps({'model': '$1', 'mixed': '$2', 'run': $3, 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'stats': r['stats_after']}))" >>"$out/train_ab.jsonl"
  stamp "$1 mixed=$2 run $3: $(tail -1 "$out/train_ab.jsonl" | cut -c1-150)"
}
for i in 1 2 3; do
  if [ $((i % 2)) = 1 ]; then run resnet50 ours $i; run resnet50 torch $i; else run resnet50 torch $i; run resnet50 ours $i; fi
done
run unet ours 1; run unet torch 1
rm -f "$db" "$db-wal" "$db-shm"
