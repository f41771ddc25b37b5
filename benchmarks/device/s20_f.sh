#!/usr/bin/env bash
# Session 20: ResNet-50 b128 training steps with the wgrad kernel on (the new default) and off, in
# turn, with the kernels' GPU time per step (--profile), cached policy, the shipped database plus
# the s20_d/s20_e records (TRAIN_DB).
#   TRAIN_DB=path bash benchmarks/device/s20_f.sh OUT    (about 7 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
export AUTOCUTLASS_DB=${TRAIN_DB:?} AUTOCUTLASS_POLICY=cached
for w in 1 0 1; do
    AUTOCUTLASS_CONV_WGRAD=$w timeout 150 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 \
        --steps 5 --profile 12 --json "$out/conv-train-wgrad$w.json" >"$out/conv-train-wgrad$w-$SECONDS.txt" 2>&1
    stamp "wgrad=$w: rc $? $(grep -E '^resnet50:' "$out"/conv-train-wgrad$w-*.txt | tail -1 | cut -c1-120)"
done
