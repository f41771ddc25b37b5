#!/usr/bin/env bash
# Session 17, last call: the search now times grouped candidates on the balanced and the skewed
# routing (per-call time of both). Retune Mixtral's T=4096 and 16384 buckets that way into a
# fresh database, then bench the six Mixtral cases from it and from the balanced-only tuning
# (s17-h200-balanced.sqlite, session 17's H200 tune), side by side on this GPU.
#   bash benchmarks/device/s17_d.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
export AUTOCUTLASS_GROUPED_KERNELS=1
timeout 150 python -m autocutlass.cli tune --shapes benchmarks/shapes-grouped-mixtral.json --trials 24 --timeout 12 \
    --db "$out/routed.sqlite" --json "$out/tune-routed.json" >"$out/tune-routed.log" 2>&1
stamp "tune: rc $? $(grep -v '^\[I ' "$out/tune-routed.log" | grep -v 'trials/s' | tail -6 | cut -c1-170)"
for db in routed balanced; do
    f=$out/routed.sqlite; [ $db = balanced ] && f=$PWD/s17-h200-balanced.sqlite
    AUTOCUTLASS_DB=$f timeout 60 python -m autocutlass.cli bench --shapes benchmarks/shapes-grouped-mixtral.json \
        --policy cached --no-first-call --rounds 5 --out "$out/bench-$db" >"$out/bench-$db.log" 2>&1
    stamp "bench ($db records): rc $?"; grep -v '^\[' "$out/bench-$db.log" | tail -8 | cut -c1-150 >&2
done
python - "$out/routed.sqlite" <<'PY' || true
import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.close()
PY
