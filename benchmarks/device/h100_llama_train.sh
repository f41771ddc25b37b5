#!/usr/bin/env bash
# Session 10: a Llama-3-8B-shaped model's training step on this GPU (an H100), tuned for it.
#   bash benchmarks/device/h100_llama_train.sh OUT tune     # record the training step's misses
#       (policy cached, the shipped databases: the H200's records serve as a sibling's), then tune
#       them (`tune --pending`) into OUT/llama.sqlite; the step's ratio before the tuning is logged
#   bash benchmarks/device/h100_llama_train.sh OUT measure DB   # the step again over DB (cached)
set -u
out=${1:?OUT}; phase=${2:?tune|measure}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
if [ "$phase" = tune ]; then
    AUTOCUTLASS_POLICY=cached AUTOCUTLASS_DB=$out/llama.sqlite timeout 150 python benchmarks/probes/llama_train_compile.py \
        --skip infer --rounds 3 --json "$out/llama-train-before.json" >"$out/llama-train-before.log" 2>&1
    stamp "before: $(grep -E '^train' "$out/llama-train-before.log" | tr '\n' ' ')"
    timeout 380 python -m autocutlass.cli tune --pending --db "$out/llama.sqlite" --trials ${TRIALS:-48} --timeout ${PER:-18} \
        --json "$out/llama-tune.json" >"$out/llama-tune.log" 2>&1
    stamp "tune --pending: rc $? $(grep -v '^\[I ' "$out/llama-tune.log" | tail -22)"
else
    db=${3:?DB}; cp "$db" /tmp/llama-user.sqlite
    AUTOCUTLASS_POLICY=cached AUTOCUTLASS_DB=/tmp/llama-user.sqlite timeout 200 python benchmarks/probes/llama_train_compile.py \
        --skip infer --rounds 7 --json "$out/llama-train-after.json" >"$out/llama-train-after.log" 2>&1
    stamp "after: $(grep -E '^train' "$out/llama-train-after.log" | tr '\n' ' ')"
fi
