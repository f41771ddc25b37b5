#!/usr/bin/env bash
# Session 37, call d (H200): where the stem's wgrad time goes, kernel by kernel (config_probe --kernels: the
# unfolding pass, the wgrad GEMM, the slab sum), for the shipped record and cuDNN; and the stem's forward.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
timeout 200 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 5 \
  --kernels 20 --case $C:rn50-stem/wgrad --case $C:rn50-stem/fprop --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "us  vendor|NOT VER|failed|kernels:" "$k/probe.txt" | cut -c1-400
(cd "$OUT" && tar czf s37d.tar.gz keep/ && rm -rf keep)
