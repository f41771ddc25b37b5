#!/usr/bin/env bash
# Session 28, call 5 (an H100): hopper_conv_wgrad's tiles across the taps (64-channel boxes over the flattened
# R*S*C columns, for layers whose C the tile width does not divide): the wgrad GPU tests (every kernel case, the
# suite layers' seeds, the same bits twice), then conv_wgrad_probe.py on the suite's losing wgrad layers: the
# shipped config, the first three seeds and the new configs, against cuDNN in benchmark mode.
#   bash benchmarks/device/s28_e.sh OUT    (about 7 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 280 python -m pytest -q -m gpu tests/test_gpu_conv_backward.py -k "wgrad or same_bits" -p no:cacheprovider \
  >"$out/gpu-tests-wgrad.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-wgrad.txt")"
timeout 280 python benchmarks/probes/conv_wgrad_probe.py --layers sd-320@64,sd-640@32,sd-1280@16,sdxl-640@64,sd-640@32-fp16 \
  --seeds 3 --rounds 3 --json "$out/wgrad-probe.json" >"$out/wgrad-probe.txt" 2>>"$out/log.txt"
stamp "probe: rc $?"
grep -E "FAIL|Error" "$out/gpu-tests-wgrad.txt" | head -20 | cut -c1-300
grep -vE "compiled in" "$out/wgrad-probe.txt" | cut -c1-150
tail -3 "$out/log.txt" | cut -c1-300
