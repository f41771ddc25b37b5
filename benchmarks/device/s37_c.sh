#!/usr/bin/env bash
# Session 37, call c (H200): as a user gets the shipped H200 file after calls a and b (the stem's wgrad record
# 64x256 sk132w/g4 rows 2 C' 64; every wgrad record rekeyed to the 132-split source): the conv suite's wgrad and
# dgrad (policy cached), and eager training steps of ResNet-50 b128 and the UNet-style stack b8
# (conv_train_probe, 5 rounds, against torch with cudnn.benchmark).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
export AUTOCUTLASS_DB=$OUT/user.sqlite
for dir in wgrad dgrad; do
  timeout 130 python -m autocutlass.cli bench --shapes $C --only "*/$dir" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$dir" >"$k/bench-$dir.txt" 2>>"$k/log.txt"
  echo "bench $dir: rc $? $(grep geomean "$k/bench-$dir.txt" | cut -c1-150)"
  rm -f "$OUT"/user.sqlite*
done
timeout 280 python benchmarks/probes/conv_train_probe.py --models resnet50,unet --rounds 5 \
  --json "$k/train.json" >"$k/train.txt" 2>&1
echo "train: rc $?"
rm -f "$OUT"/user.sqlite*
grep -v "^hit-path" "$k/bench-wgrad.txt" | cut -c1-200
tail -8 "$k/train.txt" | cut -c1-200
(cd "$OUT" && tar czf s37c.tar.gz keep/ && rm -rf keep)
