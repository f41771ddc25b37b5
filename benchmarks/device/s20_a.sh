#!/usr/bin/env bash
# Session 20 (ran at commit a8f4fde, the stream-K experiment, reverted since: needs that commit):
# stream-K for hopper_conv (and so for hopper_conv_dgrad, which runs its kernel).
# (1) conv_streamk_probe: stream-K configs vs the shipped database's configs vs cuDNN on the
# layers with a fractional last wave of output tiles; (2) the conv fprop GPU tests and the dgrad
# ones (stream-K cases and bitwise determinism among them).
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
timeout 300 python benchmarks/probes/conv_streamk_probe.py --rounds 3 --json "$out/conv-streamk-probe.json" \
    >"$out/conv-streamk-probe.txt" 2>&1
stamp "probe: rc $?"
timeout 240 python -m pytest -q -m gpu tests/test_gpu_conv.py \
    "tests/test_gpu_conv_backward.py::test_dgrad_on_the_fprop_kernel" \
    "tests/test_gpu_conv_backward.py::test_split_reductions_give_the_same_bits_twice" \
    >"$out/gpu-tests-conv-streamk.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-conv-streamk.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR" "$out/gpu-tests-conv-streamk.txt" | head -20 >&2
sed -n '/^layer /,$p' "$out/conv-streamk-probe.txt" >&2
