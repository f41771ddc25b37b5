#!/usr/bin/env bash
# Session 12: the conv suite's large-batch 3x3 layers that lost at 16 trials (fprop and dgrad run
# the same kernel), re-tuned at 64 trials from the shipped H100 records as priors, then benched
# (verdicts off).   bash benchmarks/device/s12_conv_losers.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
export AUTOCUTLASS_DB=$out/conv-losers.sqlite
only=()
for c in rn50-l3-3x3-b128 rn50-l4-3x3 rn50-l4-3x3-b256 rn50-l3-1x1; do only+=(--only "$c" --only "$c/dgrad"); done
timeout 400 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json "${only[@]}" --trials 64 --timeout 40 \
    --no-resume --json "$out/tune-conv-losers.json" >"$out/tune-conv-losers.log" 2>&1
stamp "tune: rc $? $(grep -vE '^\[I ' "$out/tune-conv-losers.log" | tail -12 | cut -c1-200)"
AUTOCUTLASS_VENDOR_VERDICTS=0 AUTOCUTLASS_SHIPPED_DBS=off timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json \
    "${only[@]}" --policy cached --no-first-call --rounds 5 --out "$out/bench-conv-losers" >"$out/bench-conv-losers.log" 2>&1
stamp "bench: rc $? $(grep -vE '^\[I ' "$out/bench-conv-losers.log" | grep -v 'served by torch' | tail -12 | cut -c1-230)"
