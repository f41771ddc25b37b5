#!/usr/bin/env bash
# For a session that gets an H200 (exits 3 on any other GPU): the conv suite's wgrad directions and
# ResNet-50 b128's retuned with session 20's hopper_conv_wgrad space into OUT/wgrad-h200.sqlite (the
# H200's records of the family were retired with its old sources), then benched from it.
#   bash benchmarks/device/s21_b.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
case "$gpu" in *H200*) ;; *) echo "not an H200: nothing run" >&2; exit 3;; esac
db=$out/wgrad-h200.sqlite
timeout 240 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --only '*/wgrad' --trials 16 \
    --timeout 18 --db "$db" --json "$out/wgrad-tune.json" >"$out/wgrad-tune.log" 2>&1
stamp "suite: rc $? $(grep -v '^\[I ' "$out/wgrad-tune.log" | grep -v 'trials/s' | tail -19 | cut -c1-170)"
timeout 180 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv-resnet50.json --only '*/wgrad' \
    --family hopper_conv_wgrad --trials 16 --timeout 14 --db "$db" --json "$out/wgrad-rn50-tune.json" \
    >"$out/wgrad-rn50-tune.log" 2>&1
stamp "rn50: rc $? $(grep -v '^\[I ' "$out/wgrad-rn50-tune.log" | grep -v 'trials/s' | tail -23 | cut -c1-170)"
python -c "import sqlite3; sqlite3.connect('$db').execute('PRAGMA wal_checkpoint(TRUNCATE)')"
AUTOCUTLASS_DB=$db timeout 120 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only '*/wgrad' \
    --policy cached --no-first-call --rounds 3 --out "$out/bench-wgrad" >"$out/bench-wgrad.log" 2>&1
stamp "bench: rc $? $(grep -v '^\[' "$out/bench-wgrad.log" | tail -22 | cut -c1-170)"
