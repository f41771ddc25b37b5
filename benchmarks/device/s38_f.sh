#!/usr/bin/env bash
# Session 38, call f (H200): one ResNet-50 b128 training step (forward, backward, SGD; channels_last bf16,
# random weights) with the convolutions through autocutlass against torch with cudnn.benchmark, from the shipped
# H200 file (policy cached): eager (5 rounds of 5 steps) and both sides under torch.compile(mode="reduce-overhead")
# (5 rounds of 3 steps), the compiled step first measured on an H200.
set -u
export PYTHONUNBUFFERED=1
export AUTOCUTLASS_POLICY=cached
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 110 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 5 --json "$k/train-rn50.json" \
  >"$k/train-rn50.txt" 2>&1
echo "eager: rc $?"
rm -f "$OUT"/user.sqlite*
timeout 420 python benchmarks/probes/conv_train_probe.py --models resnet50 --batch 128 --compile reduce-overhead \
  --rounds 5 --steps 3 --json "$k/train-rn50-compiled.json" >"$k/train-rn50-compiled.txt" 2>&1
echo "compiled: rc $?"
rm -f "$OUT"/user.sqlite*
grep -h "resnet50:\|Error" "$k"/train-rn50*.txt | cut -c1-300
(cd "$OUT" && tar czf s38f.tar.gz keep/ && rm -rf keep)
