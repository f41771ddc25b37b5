#!/usr/bin/env bash
# Session 38, call j (H200): issue 21's class shapes as a user gets the re-tuned shipped file (policy cached):
# benchmarks/shapes-online.json and benchmarks/shapes-fitted.json against torch.matmul.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
for f in online fitted; do
  rm -f "$OUT"/user.sqlite*
  timeout 130 python -m autocutlass.cli bench --shapes benchmarks/shapes-$f.json --policy cached --no-first-call \
    --rounds 5 --out "$k/bench-$f" >"$k/bench-$f.txt" 2>>"$k/log.txt"
  echo "bench $f: rc $? $(grep geomean "$k/bench-$f.txt" | cut -c1-200)"
done
for f in online fitted; do grep -v "^hit-path" "$k/bench-$f.txt" | cut -c1-150; done
rm -f "$OUT"/user.sqlite*
(cd "$OUT" && tar czf s38j.tar.gz keep/ && rm -rf keep)
