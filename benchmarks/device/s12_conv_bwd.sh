#!/usr/bin/env bash
# Session 12: the conv suite's backward directions tuned and benched on one GPU, our dgrad/wgrad
# kernels switched on (AUTOCUTLASS_CONV_DGRAD=1, AUTOCUTLASS_CONV_WGRAD=1); one direction per call
# (~6 min each):   bash benchmarks/device/s12_conv_bwd.sh OUT dgrad|wgrad [TRIALS] [SECONDS]
set -u
out=${1:?OUT}; dir=${2:?dgrad or wgrad}; trials=${3:-16}; per=${4:-14}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
export AUTOCUTLASS_CONV_DGRAD=1 AUTOCUTLASS_CONV_WGRAD=1 AUTOCUTLASS_DB=$out/conv-$dir.sqlite AUTOCUTLASS_SHIPPED_DBS=off
timeout 330 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --only "*/$dir" --trials "$trials" \
    --timeout "$per" --json "$out/tune-conv-$dir.json" >"$out/tune-conv-$dir.log" 2>&1
stamp "tune $dir: rc $? $(grep -vE '^\[I ' "$out/tune-conv-$dir.log" | tail -22 | cut -c1-190)"
AUTOCUTLASS_VENDOR_VERDICTS=0 timeout 220 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json \
    --only "*/$dir" --policy cached --no-first-call --rounds 3 --out "$out/bench-conv-$dir" >"$out/bench-conv-$dir.log" 2>&1
stamp "bench $dir (our kernels, no verdicts): rc $? $(grep -vE '^\[I ' "$out/bench-conv-$dir.log" | grep -v 'served by torch' | tail -24 | cut -c1-230)"
