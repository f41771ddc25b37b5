#!/usr/bin/env bash
# Session 37, call f (H200): the conv suite's wgrad and fprop as a user gets the shipped H200 file with call e's
# stem records (the slot-assembling unfold kernel; policy cached). The argument names the call (default f;
# call h runs this script again).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
export AUTOCUTLASS_DB=$OUT/user.sqlite
for dir in wgrad fprop; do
  pat="*/$dir"
  timeout 150 python -m autocutlass.cli bench --shapes $C --only "$pat" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$dir" >"$k/bench-$dir.txt" 2>>"$k/log.txt"
  echo "bench $dir: rc $? $(grep geomean "$k/bench-$dir.txt" | cut -c1-150)"
  rm -f "$OUT"/user.sqlite*
done
grep -hE "x cuDNN|rn50-stem|rn50-l1-1x1|rn50-l3-1x1|vae-512" "$k"/bench-*.txt | cut -c1-200
(cd "$OUT" && tar czf s37${1:-f}.tar.gz keep/ && rm -rf keep)
