#!/usr/bin/env bash
# Session 32, call g (H200): the conv suite's forward as a user gets the final shipped H200 file (conv records
# rekeyed to the stream-K sources, replaced ones pruned) (kernels.tar.xz left out: the carry limit; kernels compile on the machine), policy
# cached, against cuDNN in benchmark and default mode: the served records still hit after the rekey.
#   bash benchmarks/device/s32_g.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 300 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/fprop" --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-fprop" >"$k/bench-fprop.txt" 2>"$k/bench-fprop.log"
stamp "bench: rc $?"
(cd "$out" && tar czf s32g.tar.gz keep/)
cut -c1-200 "$k/bench-fprop.txt"; tail -3 "$k/bench-fprop.log"
