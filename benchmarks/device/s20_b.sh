#!/usr/bin/env bash
# Session 20: hopper_conv_wgrad with several taps per tile (tap_channels) and workspace split-K.
# (1) the wgrad GPU tests (the new configs among them) and the split reductions' determinism;
# (2) conv_wgrad_probe: the new configs vs the shipped database's configs vs cuDNN on the suite's
# narrow wgrad layers (C = 64, 128) and two wide ones.
#   bash benchmarks/device/s20_b.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
timeout 240 python -m pytest -q -m gpu -x "tests/test_gpu_conv_backward.py::test_wgrad_kernel" \
    "tests/test_gpu_conv_backward.py::test_split_reductions_give_the_same_bits_twice" \
    >"$out/gpu-tests-wgrad-taps.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-wgrad-taps.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR|Error|assert" "$out/gpu-tests-wgrad-taps.txt" | head -20 >&2
timeout 300 python benchmarks/probes/conv_wgrad_probe.py --rounds 3 --json "$out/conv-wgrad-probe.json" \
    >"$out/conv-wgrad-probe.txt" 2>&1
stamp "probe: rc $?"
sed -n '/^layer /,$p' "$out/conv-wgrad-probe.txt" >&2
grep -E "WRONG|failed" "$out/conv-wgrad-probe.txt" | head >&2
