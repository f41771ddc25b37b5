#!/usr/bin/env bash
# Session 19, on an H200 only: this GPU's grouped suite retuned with the routing-aware timing
# (balanced + Zipf routings, session 17) into OUT/grouped.sqlite, then benched from it (3 rounds).
# Exits 3 at once on any other GPU.
#   bash benchmarks/device/s19_f.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
case "$gpu" in *H200*) ;; *) echo "not an H200: nothing run" >&2; exit 3;; esac
export AUTOCUTLASS_GROUPED_KERNELS=1
db=$out/grouped.sqlite
timeout 350 python -m autocutlass.cli tune --shapes benchmarks/shapes-grouped.json --trials 24 --timeout 12 \
    --db "$db" --json "$out/grouped-tune.json" >"$out/grouped-tune.log" 2>&1
stamp "tune: rc $? $(grep -v '^\[I ' "$out/grouped-tune.log" | grep -v 'trials/s' | tail -26 | cut -c1-170)"
python -c "import sqlite3; sqlite3.connect('$db').execute('PRAGMA wal_checkpoint(TRUNCATE)')"
AUTOCUTLASS_DB=$db timeout 170 python -m autocutlass.cli bench --shapes benchmarks/shapes-grouped.json \
    --policy cached --no-first-call --rounds 3 --out "$out/bench-grouped" >"$out/bench-grouped.log" 2>&1
stamp "bench: rc $? $(grep -v '^\[' "$out/bench-grouped.log" | tail -27 | cut -c1-170)"
