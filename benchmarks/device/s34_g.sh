#!/usr/bin/env bash
# Session 34, call g (H200): what the host-aware vendor verdicts (GPU time + host time, vendor.py) cost and bring.
# 1. the public GEMM suite as a user gets the shipped file with GPU-time verdicts (AUTOCUTLASS_VENDOR_HOST=0),
#    against call e's default run; 2. ResNet-50 b128 eager training steps (conv_train_probe) with the default
#    verdicts and with GPU-time verdicts, each against torch with cudnn.benchmark in its own process.
#   bash benchmarks/device/s34_g.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
export AUTOCUTLASS_DB=$out/user.sqlite AUTOCUTLASS_CONV_WGRAD=1
AUTOCUTLASS_VENDOR_HOST=0 timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes.json --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-suite-gpu-verdicts" >"$k/bench-suite-gpu-verdicts.txt" 2>>"$k/log.txt"
stamp "bench suite, GPU-time verdicts: rc $? $(grep geomean "$k/bench-suite-gpu-verdicts.txt" | cut -c1-160)"
rm -f "$out"/user.sqlite*
for v in 1 0; do
  AUTOCUTLASS_VENDOR_HOST=$v timeout 200 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 5 \
    --json "$k/train-rn50-host$v.json" >"$k/train-rn50-host$v.txt" 2>&1
  stamp "train rn50 VENDOR_HOST=$v: rc $? $(tail -2 "$k/train-rn50-host$v.txt" | tr '\n' ' ' | cut -c1-200)"
  rm -f "$out"/user.sqlite*
done
(cd "$out" && tar czf s34g.tar.gz keep/)
grep -v "^hit-path" "$k/bench-suite-gpu-verdicts.txt" | cut -c1-150
tail -6 "$k"/train-rn50-host*.txt
