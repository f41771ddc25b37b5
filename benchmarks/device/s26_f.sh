#!/usr/bin/env bash
# Session 26, call 7 (an H100): sd-320@64's wgrad read x0.749 of cuDNN in s26_e.sh's bench with the
# record a 40-trial tune had timed at x0.939 (128x192 serial split 2, 1x2 cluster), and the same
# config class (1x1 cluster) read 450 TF/s in one process and 305 in another: the shipped config and
# the family's first seeds timed against cuDNN in three separate processes (conv_wgrad_probe.py).
#   bash benchmarks/device/s26_f.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off
for i in 1 2 3; do
  timeout 100 python benchmarks/probes/conv_wgrad_probe.py --layers sd-320@64,sd-640@32 --seeds 3 --rounds 5 \
    --json "$out/probe-$i.json" >"$out/probe-$i.txt" 2>>"$out/log.txt"
  stamp "probe $i: rc $?"
  grep -E "^sd-" "$out/probe-$i.txt" | grep -v "best" | cut -c1-100 >&2
done
