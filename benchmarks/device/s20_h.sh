#!/usr/bin/env bash
# Session 20: where ResNet-50 b128 training's round-to-round jitter comes from: conv_train_probe
# with the wgrad kernel on and off, each with Python's garbage collector on and off (--no-gc)
# during the timed rounds; cached policy, TRAIN_DB.
#   TRAIN_DB=path bash benchmarks/device/s20_h.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
export AUTOCUTLASS_DB=${TRAIN_DB:?} AUTOCUTLASS_POLICY=cached
for run in "1 gc" "1 nogc" "0 gc" "0 nogc" "1 nogc" "1 gc"; do
    set -- $run
    extra=(); [ "$2" = nogc ] && extra=(--no-gc)
    tag="wgrad$1-$2-$SECONDS"
    AUTOCUTLASS_CONV_WGRAD=$1 timeout 120 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 \
        --steps 5 "${extra[@]}" --json "$out/conv-train-$tag.json" >"$out/conv-train-$tag.txt" 2>&1
    stamp "$tag: rc $? $(grep -E '^resnet50:' "$out/conv-train-$tag.txt" | cut -c1-70) $(python -c "import json;d=json.load(open('$out/conv-train-$tag.json'));print([round(x,1) for x in d['models']['resnet50']['rounds_ms']['autocutlass']])")"
done
