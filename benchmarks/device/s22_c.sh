#!/usr/bin/env bash
# Session 22: where ResNet-50 b128 training loses its last few percent (H100). The shipped database
# (host-aware verdicts since s22_a) copied to OUT/db.sqlite; (1) conv_train_probe with a torch.profiler
# view of one step per side (GPU kernel time by kernel), (2) conv_train_host_probe: host time per step
# until the last launch and wall per step, cProfile of our steps, CUDA runtime calls.
#   bash benchmarks/device/s22_c.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$out/db.sqlite
cp "tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite" "$db" || exit 3
AUTOCUTLASS_DB="$db" timeout 150 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 5 \
    --profile 60 --json "$out/train.json" >/dev/null 2>"$out/train.txt"
echo "train: rc $? $(grep '^resnet50' "$out/train.txt" | cut -c1-200)" >&2
AUTOCUTLASS_DB="$db" timeout 150 python benchmarks/probes/conv_train_host_probe.py --model resnet50 --steps 3 --top 45 \
    >"$out/host.txt" 2>&1
echo "host: rc $? $(head -2 "$out/host.txt")" >&2
rm -f "$db" "$db-wal" "$db-shm"
