#!/usr/bin/env bash
# Session 10, after benchmarks/device/h100_ship_tune.sh: with the H100 database in tuning_dbs/
# (exported from that run's OUT/tune.sqlite, which is also passed here as the off-line reference):
# 1. the public GEMM suite and its fp8 and tf32 companions from the shipped databases alone
#    (an empty user database, --policy cached): ratios vs torch;
# 2. on-line tuning (benchmarks/probes/online_tune_probe.py, policy tune, empty user database,
#    shipped databases off): per-shape stall and wall time, ratio vs torch and vs the off-line tune.
#   bash benchmarks/device/h100_ship_bench.sh OUT OFFLINE.sqlite [PHASES]   PHASES: bench,online
set -u
out=${1:?OUT}; offline=${2:?offline db}; phases=${3:-bench,online}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
w=$(mktemp -d)
if [[ $phases == *bench* ]]; then
    for f in shapes shapes-fp8 shapes-tf32; do
        AUTOCUTLASS_DB=$w/user-$f.sqlite timeout 150 python -m autocutlass.cli bench --shapes benchmarks/$f.json \
            --policy cached --no-first-call --out "$out/bench-$f" >"$out/bench-$f.log" 2>&1
        stamp "bench $f: rc $? $(grep -i geomean "$out/bench-$f.log" | head -3 | tr '\n' ' ' | cut -c1-300)"
    done
fi
if [[ $phases == *online* ]]; then
    timeout 330 python benchmarks/probes/online_tune_probe.py --shapes benchmarks/shapes.json --policies tune \
        --offline-db "$offline" --rounds 3 --json "$out/online-tune.json" >"$out/online-tune.log" 2>&1
    stamp "online: rc $? $(tail -3 "$out/online-tune.log" | tr '\n' ' ' | cut -c1-400)"
fi
stamp done
