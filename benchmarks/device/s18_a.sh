#!/usr/bin/env bash
# For the next session with device time, first: session 17's CPU-only changes checked on a GPU.
# (1) verification's guard bands and pristine operands (ops/guards.py) on every family's GPU
# tests: a kernel that writes outside its output or into an operand now fails verification, so
# any family whose candidates start failing shows here; (2) the routing-aware grouped search
# (balanced + skewed timing) retuning this GPU's grouped suite into OUT/grouped.sqlite, then the
# suite benched from it. Two calls of at most 10 minutes: part 1, then part 2.
#   bash benchmarks/device/s18_a.sh OUT 1    # GPU tests (about 8 minutes)
#   bash benchmarks/device/s18_a.sh OUT 2    # grouped retune + bench (about 7 minutes)
set -u
out=${1:?OUT}; part=${2:?PART}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
if [ "$part" = 1 ]; then
    timeout 560 python -m pytest -q -m gpu tests/test_gpu_kernels.py tests/test_search_gpu.py tests/test_gpu_grouped.py \
        tests/test_gpu_conv.py tests/test_gpu_conv_backward.py tests/test_gpu_gemv.py tests/test_gpu_swiglu.py \
        tests/test_gpu_gated.py tests/test_gpu_scaled_mm.py >"$out/gpu-tests.txt" 2>&1
    stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
    grep -E "^FAILED|^ERROR|outside the output|changed its input" "$out/gpu-tests.txt" | head -20 >&2
else
    export AUTOCUTLASS_GROUPED_KERNELS=1
    timeout 330 python -m autocutlass.cli tune --shapes benchmarks/shapes-grouped.json --trials 24 --timeout 12 \
        --db "$out/grouped.sqlite" --json "$out/grouped-tune.json" >"$out/grouped-tune.log" 2>&1
    stamp "tune: rc $? $(grep -v '^\[I ' "$out/grouped-tune.log" | grep -v 'trials/s' | tail -26 | cut -c1-170)"
    python -c "import sqlite3; sqlite3.connect('$out/grouped.sqlite').execute('PRAGMA wal_checkpoint(TRUNCATE)')"
    AUTOCUTLASS_DB=$out/grouped.sqlite timeout 200 python -m autocutlass.cli bench --shapes benchmarks/shapes-grouped.json \
        --policy cached --no-first-call --rounds 3 --out "$out/bench-grouped" >"$out/bench-grouped.log" 2>&1
    stamp "bench: rc $? $(grep -v '^\[' "$out/bench-grouped.log" | tail -27 | cut -c1-170)"
fi
