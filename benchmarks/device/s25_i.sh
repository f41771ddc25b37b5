#!/usr/bin/env bash
# Session 25, call 14 (an H100): swap_ab with workspace split-K (the reduce kernel's transposed
# class): (1) benchmarks/probes/swap_split_probe.py on six M-residue, long-K GEMMs (kernels
# precompiled into .s25cache/swap.tar.xz, which only that run's working tree had); (2) the GEMM
# kernel and reduce GPU tests (their new swapped workspace and transposed-reduce cases).
#   bash benchmarks/device/s25_i.sh OUT    (about 7 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off
tmp=$(mktemp -d); tar xJf .s25cache/swap.tar.xz -C "$tmp"
timeout 200 python benchmarks/probes/swap_split_probe.py --cache "$tmp/swapcache" --json "$out/swap-split-probe.json" \
  >"$out/swap-split-probe.txt" 2>"$out/log.txt"
stamp "probe: rc $?"
grep "^best" "$out/swap-split-probe.txt" >&2
AUTOCUTLASS_CACHE_DIR=$(mktemp -d) timeout 330 python -m pytest -q -x tests/test_gpu_reduce.py tests/test_gpu_kernels.py \
  >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt")"
grep -E "FAILED|Error" "$out/gpu-tests.txt" | head -5 >&2
