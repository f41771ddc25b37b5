#!/usr/bin/env bash
# Session 20: hopper_conv_wgrad with several taps per tile, workspace split-K up to 64 splits and
# its own slab-sum kernel. (1) the wgrad GPU tests and the split reductions' determinism;
# (2) conv_wgrad_probe on every 3x3 wgrad layer of the conv suite.
#   bash benchmarks/device/s20_c.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
timeout 150 python -m pytest -q -m gpu "tests/test_gpu_conv_backward.py::test_wgrad_kernel" \
    "tests/test_gpu_conv_backward.py::test_split_reductions_give_the_same_bits_twice" \
    >"$out/gpu-tests-wgrad-slabs.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-wgrad-slabs.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR|Error:" "$out/gpu-tests-wgrad-slabs.txt" | head -20 >&2
timeout 420 python benchmarks/probes/conv_wgrad_probe.py --rounds 3 --json "$out/conv-wgrad-probe.json" \
    >"$out/conv-wgrad-probe.txt" 2>&1
stamp "probe: rc $?"
grep -E "WRONG|failed" "$out/conv-wgrad-probe.txt" | head >&2
sed -n '/^best /p' "$out/conv-wgrad-probe.txt" >&2
