#!/usr/bin/env bash
# Session 36, call d (H200): the conv suite's dgrad and wgrad against cuDNN as a user gets the shipped H200
# file (policy cached; the H200's dgrad was last benched in session 13, its wgrad in session 30), and the
# wgrad again with GPU-time verdicts (AUTOCUTLASS_VENDOR_HOST=0, README's setting for GPU-bound work).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
for dir in dgrad wgrad; do
  timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/$dir" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$dir" >"$k/bench-$dir.txt" 2>>"$k/log.txt"
  echo "bench $dir: rc $? $(grep geomean "$k/bench-$dir.txt" | cut -c1-200)"
done
AUTOCUTLASS_VENDOR_HOST=0 timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json \
  --only "*/wgrad" --policy cached --no-first-call --rounds 5 --out "$k/bench-wgrad-gpu-verdicts" \
  >"$k/bench-wgrad-gpu-verdicts.txt" 2>>"$k/log.txt"
echo "bench wgrad gpu verdicts: rc $? $(grep geomean "$k/bench-wgrad-gpu-verdicts.txt" | cut -c1-200)"
(cd "$OUT" && tar czf s36d.tar.gz keep/ && rm -rf keep user.sqlite*)
