#!/usr/bin/env bash
# Session 22: ResNet-50 b128 training's jitter on our side read off the GPU timeline
# (conv_train_jitter_probe.py: busy, idle gaps, kernels with a large max/median), 15 steps per
# side (ours, torch, ours), shipped database of this GPU copied to OUT/db.sqlite.
#   bash benchmarks/device/s22_e.sh OUT    (about 2 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$out/db.sqlite
cp "tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite" "$db" || exit 3
AUTOCUTLASS_DB="$db" timeout 200 python benchmarks/probes/conv_train_jitter_probe.py --model resnet50 --steps 15 \
    --json "$out/jitter.json" >"$out/jitter.txt" 2>"$out/log.txt"
echo "jitter: rc $?" >&2
cat "$out/jitter.txt" >&2
rm -f "$db" "$db-wal" "$db-shm"
