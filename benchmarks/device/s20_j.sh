#!/usr/bin/env bash
# Session 20: every GPU test after the session's changes (the wgrad family on by default and
# tuned-only, its new configs, the GEMM check's split domain, the cost model's workspace splits).
#   bash benchmarks/device/s20_j.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
timeout 560 python -m pytest -q -m gpu tests/ -p no:cacheprovider >"$out/gpu-tests-all.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-all.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR" "$out/gpu-tests-all.txt" | cut -c1-300 | head -30 >&2
