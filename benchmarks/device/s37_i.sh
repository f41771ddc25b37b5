#!/usr/bin/env bash
# Session 37, call i (H200): torchvision ResNet-50 b128 inference (channels_last bf16, random weights) on the final
# shipped H200 file (the stem's forward on the slot-assembling unfold kernel), policy cached, against
# cudnn.benchmark, unfused and with fuse_conv_bn; then its eager training step (conv_train_probe), time permitting.
set -u
export PYTHONUNBUFFERED=1
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 110 python benchmarks/probes/resnet50_e2e.py --fuse-bn --rounds 5 --json "$OUT/rn50-infer.json" \
  >"$OUT/rn50-infer.txt" 2>>"$OUT/log.txt"
echo "resnet50 inference: rc $?"
tail -8 "$OUT/rn50-infer.txt" | cut -c1-200
rm -f "$OUT"/user.sqlite*
timeout 100 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 5 --json "$OUT/train-rn50.json" \
  >"$OUT/train-rn50.txt" 2>&1
echo "train rn50: rc $?"
grep -E "^resnet50:" "$OUT/train-rn50.txt" | cut -c1-160
rm -f "$OUT"/user.sqlite*
