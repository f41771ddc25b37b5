#!/usr/bin/env bash
# One 2-GPU device call after a session's changes: GPU 0 runs every GPU test (DSL-free load on); GPU 1 compares a
# ResNet-50 training step's gradients with float32 (conv backward gates off, then on) and measures
# the cold start (DSL-free load off, then on). Everything lands in OUT/final.tgz (a call returns
# at most 8 files).   bash benchmarks/device/final_checks.sh OUT
set -u
out=${1:?OUT}; w=$(mktemp -d); mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
(
    export CUDA_VISIBLE_DEVICES=0 AUTOCUTLASS_DB=$w/tests.sqlite AUTOCUTLASS_DSL_FREE_LOAD=1  # the suite on the DSL-free load path
    timeout 330 python -m pytest -q -p no:warnings -m gpu -n 14 tests/ >"$w/gpu-tests.txt" 2>&1
    stamp "gpu tests: $(tail -1 "$w/gpu-tests.txt")"
) &
(
    export CUDA_VISIBLE_DEVICES=1 AUTOCUTLASS_POLICY=cached AUTOCUTLASS_DB=$w/user.sqlite
    timeout 130 python benchmarks/probes/conv_train_probe.py --models resnet50 --batch 32 --rounds 2 --steps 2 \
        --json "$w/rn50-train-default.json" >"$w/rn50-train-default.log" 2>&1
    stamp "rn50 train (default): $(grep -E '^resnet50' "$w/rn50-train-default.log" | cut -c1-400)"
    AUTOCUTLASS_CONV_DGRAD=1 AUTOCUTLASS_CONV_WGRAD=1 timeout 130 python benchmarks/probes/conv_train_probe.py --models resnet50 \
        --batch 32 --rounds 2 --steps 2 --json "$w/rn50-train-gates.json" >"$w/rn50-train-gates.log" 2>&1
    stamp "rn50 train (gates on): $(grep -E '^resnet50' "$w/rn50-train-gates.log" | cut -c1-400)"
    for free in 0 1; do
        AUTOCUTLASS_DSL_FREE_LOAD=$free timeout 70 python benchmarks/probes/cold_start.py --no-cold --repeats 2 --cases square,decode \
            --json "$w/cold-start-free$free.json" >"$w/cold-start-free$free.log" 2>&1
        stamp "cold start (free load $free): $(tail -3 "$w/cold-start-free$free.log" | tr '\n' ' ' | cut -c1-600)"
    done
) &
wait
tar czf "$out/final.tgz" -C "$w" --exclude='*.sqlite*' .
stamp "done"
