#!/usr/bin/env bash
# Session 24, call 2 (an H100): wide workspace split-K on few-tile, long-K GEMMs
# (benchmarks/probes/split_probe.py, kernels precompiled here into split-cache.tar.xz, untracked),
# then the GPU tests of workspace split-K (the new 33-, 40- and 66-split cases) and the reduce kernel.
#   bash benchmarks/device/s24_b.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
tar -xJf split-cache.tar.xz
timeout 330 python benchmarks/probes/split_probe.py --cache .split-cache --json "$out/split-probe.json" \
    >"$out/split-probe.txt" 2>"$out/log.txt"
stamp "split probe: rc $?"
timeout 200 python -m pytest -q -x tests/test_gpu_kernels.py tests/test_gpu_reduce.py -k "workspace or sk or reduce" \
    >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt")"
grep "^best" "$out/split-probe.txt" >&2
