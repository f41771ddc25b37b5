#!/usr/bin/env bash
# Session 36, call e (H200): the training-step GPU tests owed since session 35 switched the strided dgrad
# family off by default (a convnet step's gradients against torch with the wgrad kernel off and on, the conv
# modules' sites, an NCHW input layer), then torchvision ResNet-50 b128 inference on the shipped H200 file
# (policy cached) against cudnn.benchmark, unfused and with fuse_conv_bn, with fresh processes' first forwards.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv_backward.py \
  -k "training_step or train_through or nchw_input" >"$k/gpu-tests-train.txt" 2>&1
echo "gpu tests train: rc $? $(tail -1 "$k/gpu-tests-train.txt")"
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 240 python benchmarks/probes/resnet50_e2e.py --fuse-bn --first-call --json "$k/rn50-infer.json" \
  >"$k/rn50-infer.txt" 2>>"$k/log.txt"
echo "resnet50 inference: rc $?"
tail -12 "$k/rn50-infer.txt"
(cd "$OUT" && tar czf s36e.tar.gz keep/ && rm -rf keep user.sqlite*)
