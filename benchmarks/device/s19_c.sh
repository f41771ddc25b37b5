#!/usr/bin/env bash
# Session 19: conv sites (autocutlass.nn.conv_site) on a GPU. (1) the conv GPU tests that train
# through autocutlass.nn.Conv2d; (2) s19_b's training probes again (ResNet-50 b128, UNet-style
# stack b8: steps vs torch, host time per step).
#   bash benchmarks/device/s19_c.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
timeout 280 python -m pytest -q -m gpu tests/test_gpu_conv_backward.py tests/test_gpu_torch_ops.py \
    >"$out/gpu-tests-conv-site.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-conv-site.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR" "$out/gpu-tests-conv-site.txt" | head -10 >&2
bash benchmarks/device/s19_b.sh "$out"
