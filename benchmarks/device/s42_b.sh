#!/usr/bin/env bash
# Session 42, call b (H100): the public GEMM suite as a user gets the shipped files (policy cached; the last
# H100 run of it was session 26), and a second run of the conv suite's wgrad and dgrad with each cuDNN mode
# on a thread of its own (call a's first). Worst case about 410 s.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
bench() {
  timeout $3 python -m autocutlass.cli bench --shapes $1 ${4:+--only "*/$4"} --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$2" >"$k/bench-$2.txt" 2>>"$k/log.txt"
  echo "bench $2: rc $? $(grep geomean "$k/bench-$2.txt" | cut -c1-230)"
  rm -f "$OUT"/user.sqlite*
}
bench benchmarks/shapes.json suite 150
bench benchmarks/shapes-conv.json wgrad 130 wgrad
bench benchmarks/shapes-conv.json dgrad 130 dgrad
grep -v "^hit-path" "$k/bench-suite.txt" | cut -c1-175
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s42b.tar.gz keep/ && rm -rf keep)
