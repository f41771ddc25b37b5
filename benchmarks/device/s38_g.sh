#!/usr/bin/env bash
# Session 38, call g (H200): the eager ResNet-50 b128 training step of call f again, with room for the first
# process's kernel loads (call f's eager run found no kernel cache and timed out at 110 s): 7 rounds of 5 steps.
set -u
export PYTHONUNBUFFERED=1
export AUTOCUTLASS_POLICY=cached
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 270 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 --json "$k/train-rn50.json" \
  >"$k/train-rn50.txt" 2>&1
echo "eager: rc $?"
rm -f "$OUT"/user.sqlite*
grep -h "resnet50:\|Error" "$k"/train-rn50*.txt | cut -c1-300
(cd "$OUT" && tar czf s38g.tar.gz keep/ && rm -rf keep)
