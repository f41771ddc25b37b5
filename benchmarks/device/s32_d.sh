#!/usr/bin/env bash
# Session 32, calls d (H100) and e (H200): training steps under torch.compile(mode="reduce-overhead") on both
# sides (CUDA graphs), the shipped file of the GPU, policy cached: ResNet-50 at batch 128 and the UNet-style stack
# at batch 16 (d), or the UNet-style stack at batch 8 (e: the H200's figure of call c's).
#   bash benchmarks/device/s32_d.sh OUT d|e    (about 8 minutes)
set -u
out=${1:?OUT}; call=${2:?d or e}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
export AUTOCUTLASS_POLICY=cached
if [ "$call" = d ]; then
  timeout 150 python benchmarks/probes/conv_train_probe.py --models unet --unet-batch 16 --compile reduce-overhead \
    --rounds 7 --steps 5 --json "$k/train-unet16-compiled.json" >"$k/train-unet16-compiled.txt" 2>&1
  stamp "unet b16 compiled: rc $? $(grep -h 'unet:' "$k/train-unet16-compiled.txt" | tail -1)"
  timeout 400 python benchmarks/probes/conv_train_probe.py --models resnet50 --batch 128 --compile reduce-overhead \
    --rounds 5 --steps 3 --json "$k/train-rn50-compiled.json" >"$k/train-rn50-compiled.txt" 2>&1
  stamp "resnet50 compiled: rc $? $(grep -h 'resnet50:' "$k/train-rn50-compiled.txt" | tail -1)"
else
  timeout 330 python benchmarks/probes/conv_train_probe.py --models unet --compile reduce-overhead \
    --rounds 7 --steps 5 --json "$k/train-unet-compiled.json" >"$k/train-unet-compiled.txt" 2>&1
  stamp "unet compiled: rc $? $(grep -h 'unet:' "$k/train-unet-compiled.txt" | tail -1)"
fi
(cd "$out" && tar czf "s32$call.tar.gz" keep/)
for f in "$k"/*.txt; do echo "== $f"; grep -h "unet:\|resnet50:\|Error" "$f" | tail -3 | cut -c1-400; done
