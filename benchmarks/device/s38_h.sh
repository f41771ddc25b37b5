#!/usr/bin/env bash
# Session 38, call h (H200): the tuner's and the GEMM dispatch's GPU tests with the wide tiles in the space and
# the re-tuned shipped file (call c's -k filter had deselected the tuner's).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 280 python -m pytest -q -p no:cacheprovider tests/test_search_gpu.py tests/test_gpu_dispatch.py \
  >"$k/gpu-tests.txt" 2>&1
echo "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
grep -E "^FAILED|Error" "$k/gpu-tests.txt" | head -10 | cut -c1-250
rm -f "$OUT"/user.sqlite*
(cd "$OUT" && tar czf s38h.tar.gz keep/ && rm -rf keep)
