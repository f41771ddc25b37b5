#!/usr/bin/env bash
# Session 15, part F (one GPU): decode GEMMs of other models (benchmarks/shapes-decode-other.json, no
# record of them ships) from an empty user database under policy tune: the first call's on-line
# tuning time (hopper_gemv for 1-4 rows, hopper_gemm above) and the result side by side with torch.
#   bash benchmarks/device/s15_f.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=$(mktemp -d)/user.sqlite timeout 380 python -m autocutlass.cli bench --shapes benchmarks/shapes-decode-other.json \
    --policy tune --flush read --no-first-call --rounds 5 --out "$out/bench" >"$out/bench.txt" 2>&1
stamp "bench: rc $? $(tail -16 "$out/bench.txt" | cut -c1-200)"
