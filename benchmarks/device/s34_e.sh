#!/usr/bin/env bash
# Session 34, call e (H200): the GPU tests of the kernel change (hopper_gemm's split order, inherited by every
# family that builds on the GEMM kernel): tests/test_gpu_kernels.py whole, the wgrad kernel and determinism tests,
# the tuner's; then the public GEMM suite as a user gets the shipped file (policy cached).
#   bash benchmarks/device/s34_e.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 260 python -m pytest -q -p no:cacheprovider tests/test_gpu_kernels.py tests/test_search_gpu.py \
  >"$k/gpu-tests-kernels.txt" 2>&1
stamp "gpu tests kernels+search: rc $? $(tail -1 "$k/gpu-tests-kernels.txt")"
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv_backward.py -k "wgrad or same_bits" \
  >"$k/gpu-tests-wgrad.txt" 2>&1
stamp "gpu tests wgrad: rc $? $(tail -1 "$k/gpu-tests-wgrad.txt")"
rm -f "$out"/user.sqlite*
timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes.json --policy cached --no-first-call --rounds 5 \
  --out "$k/bench-suite" >"$k/bench-suite.txt" 2>>"$k/log.txt"
stamp "bench suite: rc $? $(grep geomean "$k/bench-suite.txt" | cut -c1-160)"
(cd "$out" && tar czf s34e.tar.gz keep/)
grep -E "FAIL|Error" "$k"/gpu-tests-*.txt | head -10
grep -v "^hit-path" "$k/bench-suite.txt" | cut -c1-150
