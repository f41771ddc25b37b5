#!/usr/bin/env bash
# ResNet-50 and a 2-layer Llama-3-8B end to end, from a given database: a first pass serves what is
# stored (policy cached) and records the misses; the misses are tuned on every GPU of the host
# through the queue (tune --pending --enqueue, one worker); a second pass measures again, with the
# first-call times of fresh processes. GPU machine, from the repository root:
#   bash benchmarks/probes/models_pending.sh OUT_DIR [SEED_DB] [TRIALS]
set -u
out=${1:?usage: models_pending.sh OUT_DIR [SEED_DB] [TRIALS]}
seed=${2:-}
trials=${3:-12}
mkdir -p "$out"
work=$(mktemp -d)
export AUTOCUTLASS_DB="$work/user.sqlite" AUTOCUTLASS_POLICY=cached
stamp() { echo "[$(date +%T)] $*" >&2; }
if [ -n "$seed" ]; then python3 -m autocutlass.cli db import "$seed" >"$out/import.log" 2>&1; fi
stamp "pass 1"
python3 benchmarks/probes/resnet50_e2e.py --json "$out/rn50-pass1.json" 2>&1 | tail -3
python3 benchmarks/probes/llama_train_compile.py --json "$out/llama-pass1.json" --rounds 3 2>&1 | tail -8
stamp "tuning the misses"
python3 -m autocutlass.cli tune --pending --enqueue --trials "$trials" >"$out/tune.log" 2>&1
python3 -m autocutlass.cli tune --worker --heartbeat 5 >>"$out/tune.log" 2>&1
tail -60 "$out/tune.log" | grep -E "problems in|x torch|^[a-z]" | tail -50
stamp "pass 2"
python3 benchmarks/probes/resnet50_e2e.py --json "$out/rn50-pass2.json" --first-call 2>&1 | tail -6
python3 benchmarks/probes/llama_train_compile.py --json "$out/llama-pass2.json" 2>&1 | tail -8
cp "$AUTOCUTLASS_DB" "$out/user.sqlite"
stamp "done"
