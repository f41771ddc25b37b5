#!/usr/bin/env bash
# Session 18: is the bench biased against autocutlass on Mixtral's large experts? s18_c's torch
# verdict and stand-in rows (torch on both sides) read x0.92-0.99. Bench the six Mixtral cases
# (7 rounds) with the grouped kernels off (autocutlass's torch path against bare torch), then
# from session 18's run-b records with the kernels on (ours at T=16384 included).
#   bash benchmarks/device/s18_d.sh OUT    (needs s18-h100-grouped-b.sqlite in the tree)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
AUTOCUTLASS_GROUPED_KERNELS=0 timeout 120 python -m autocutlass.cli bench --shapes benchmarks/shapes-grouped-mixtral.json \
    --policy cached --no-first-call --rounds 7 --out "$out/bench-off" >"$out/bench-off.log" 2>&1
stamp "kernels off: rc $?"; grep -v '^\[' "$out/bench-off.log" | tail -9 | cut -c1-150 >&2
AUTOCUTLASS_SHIPPED_DBS=off AUTOCUTLASS_DB=$PWD/s18-h100-grouped-b.sqlite timeout 120 python -m autocutlass.cli bench \
    --shapes benchmarks/shapes-grouped-mixtral.json --policy cached --no-first-call --rounds 7 --out "$out/bench-b" \
    >"$out/bench-b.log" 2>&1
stamp "run-b records: rc $?"; grep -v '^\[' "$out/bench-b.log" | tail -9 | cut -c1-150 >&2
