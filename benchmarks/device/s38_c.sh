#!/usr/bin/env bash
# Session 38, call c (H200): the GPU tests of the wide cooperative tiles (tests/test_gpu_kernels.py's 256x192 and
# 256x160 cases: residues, layouts, batched, clusters, epilogues, split-K, stream-K, fp8, tf32, swapped) and the
# tuner's GPU tests; then, as a user gets the shipped file re-tuned in call b (policy cached), the public GEMM
# suite and the re-tune list (benchmarks/shapes-wide-tiles.json).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_kernels.py -k "256x192 or 256x160" tests/test_search_gpu.py \
  >"$k/gpu-tests.txt" 2>&1
echo "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
rm -f "$OUT"/user.sqlite*
timeout 170 python -m autocutlass.cli bench --shapes benchmarks/shapes.json --policy cached --no-first-call --rounds 7 \
  --out "$k/bench-suite" >"$k/bench-suite.txt" 2>>"$k/log.txt"
echo "bench suite: rc $? $(grep geomean "$k/bench-suite.txt" | cut -c1-160)"
rm -f "$OUT"/user.sqlite*
timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-wide-tiles.json --policy cached --no-first-call \
  --rounds 5 --out "$k/bench-wide" >"$k/bench-wide.txt" 2>>"$k/log.txt"
echo "bench wide: rc $? $(grep geomean "$k/bench-wide.txt" | cut -c1-160)"
grep -E "FAIL|Error" "$k"/gpu-tests.txt | head -10
grep -v "^hit-path" "$k/bench-suite.txt" | cut -c1-150
grep -v "^hit-path" "$k/bench-wide.txt" | cut -c1-150
(cd "$OUT" && rm -f user.sqlite* && tar czf s38c.tar.gz keep/ && rm -rf keep)
