#!/usr/bin/env bash
# Session 20: (1) host time of a ResNet-50 b128 training step with the wgrad kernel off and on
# (conv_train_host_probe, cached policy, TRAIN_DB); (2) the GPU tests of conv backward, torch ops
# and the conv sites with the wgrad kernel on by default.
#   TRAIN_DB=path bash benchmarks/device/s20_g.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
for w in 0 1; do
    AUTOCUTLASS_DB=${TRAIN_DB:?} AUTOCUTLASS_POLICY=cached AUTOCUTLASS_CONV_WGRAD=$w timeout 120 \
        python benchmarks/probes/conv_train_host_probe.py --model resnet50 --steps 3 --top 40 \
        >"$out/conv-train-host-wgrad$w.txt" 2>&1
    stamp "host probe wgrad=$w: rc $? $(grep -E 'per step' "$out/conv-train-host-wgrad$w.txt" | head -4 | tr '\n' ' ')"
done
timeout 300 python -m pytest -q -m gpu tests/test_gpu_conv_backward.py tests/test_gpu_torch_ops.py \
    >"$out/gpu-tests-conv-backward-wgrad-on.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-conv-backward-wgrad-on.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR" "$out/gpu-tests-conv-backward-wgrad-on.txt" | head -20 >&2
