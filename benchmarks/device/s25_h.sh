#!/usr/bin/env bash
# Session 25, call 12 (an H100): s24_i.sh again with the new split-K reduce (on-line tuning: policy tune, an empty
# user database and kernel cache, the shipped databases off (priors only from the shapes tuned
# before in the same process), over benchmarks/shapes-online.json then shapes-longk.json); each
# shape's stall, its winner against torch and against the off-line records of the shipped H100
# database (the best of this and earlier sessions' 16- to 64-trial tunes of the same shapes).
#   bash benchmarks/device/s25_h.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
offline=$(mktemp -d)/offline.sqlite
cp tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite "$offline"
timeout 420 python benchmarks/probes/online_tune_probe.py --shapes benchmarks/shapes-online.json \
    --shapes benchmarks/shapes-longk.json --policies tune --offline-db "$offline" --rounds 5 \
    --json "$out/online-tune.json" 2>&1 | grep -v "^\[I 20" >"$out/online-tune.txt"
stamp "online: $(tail -24 "$out/online-tune.txt" | cut -c1-220)"
