#!/usr/bin/env bash
# Session 24, call 8 (an H200): the shipped H200 database as a user gets it (policy cached, vendor
# verdicts as shipped: every record re-timed with host times this session) on the public GEMM suite
# and issue 21's class shapes, against torch.matmul; JSON + plot per shapes file under OUT.
#   bash benchmarks/device/s24_f.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
for f in shapes shapes-online shapes-longk; do
  timeout 200 python -m autocutlass.cli bench --shapes "benchmarks/$f.json" --policy cached --rounds 7 \
      --no-first-call --out "$out/$f" >"$out/bench-$f.txt" 2>>"$out/log.txt"
  stamp "bench $f: rc $? $(grep -i geomean "$out/bench-$f.txt" | head -2 | tr '\n' ' ')"
  [ "$f" = shapes ] || rm -f "$out/$f"/*.png  # a call returns at most 8 files
done
ls -R "$out" >&2
