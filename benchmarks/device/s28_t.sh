#!/usr/bin/env bash
# Session 28, call 8 (an H100): the convolution GPU tests on the session's last kernel sources (forward, backward,
# pointwise, unfolded, the torch ops' conv cases).
#   bash benchmarks/device/s28_t.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 540 python -m pytest -q -m gpu tests/test_gpu_conv.py tests/test_gpu_conv_backward.py tests/test_gpu_conv_pointwise.py \
  tests/test_gpu_conv_unfold.py -p no:cacheprovider >"$out/gpu-tests-conv.txt" 2>&1
echo "rc $? $(tail -1 "$out/gpu-tests-conv.txt")" >&2
grep -E "FAILED|Error" "$out/gpu-tests-conv.txt" | head -20 | cut -c1-300
