#!/usr/bin/env bash
# Session 28, call 1 (an H100): the several-rows unfolded families (s27_rows.patch, merged) on the GPU for the
# first time: their GPU tests (the smem-staged unfolding kernel against the torch map bit for bit, every T), and
# conv_unfold_probe.py: the first six seeds (T = 3, 2, 1 in turn) of the stem at b32 and b128 and a 4-channel
# latent layer, against cuDNN, with the unfolding kernel alone for each T.
#   bash benchmarks/device/s28_a.sh OUT    (about 4 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 240 python -m pytest -q -m gpu tests/test_gpu_conv_unfold.py -p no:cacheprovider >"$out/gpu-tests-unfold.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-unfold.txt")"
timeout 240 python benchmarks/probes/conv_unfold_probe.py --seeds 6 --rounds 3 --layers rn50-stem-b32,rn50-stem-b128,unet-in-4ch@64 \
  --json "$out/unfold-probe.json" >"$out/unfold-probe.txt" 2>>"$out/log.txt"
stamp "probe: rc $?"
grep -E "FAIL|Error|error" "$out/gpu-tests-unfold.txt" | head -20 | cut -c1-300
tail -5 "$out/log.txt" | cut -c1-300
cat "$out/unfold-probe.txt"
