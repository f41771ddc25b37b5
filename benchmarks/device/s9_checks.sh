#!/usr/bin/env bash
# Session 9's GPU checks (prepared in session 9, which had no device time left; run them first in
# the next session, about 8 minutes on one GPU):
# 1. the second-process GPU test that failed in session 8 (since pinned to its own database with
#    vendor verdicts off), linear's residual epilogue, and the GPU tests of the conv2d eager
#    training path (conv backward, torch ops);
# 2. cold start with lookups through sqlite3 (default) and through SQLAlchemy
#    (AUTOCUTLASS_DB_SQLITE_READS=0), warm database and kernel cache;
# 3. a ResNet-50 b32 training step on the eager path (default gates);
# 4. linear's fused residual against F.linear + add (benchmarks/probes/linear_residual_bench.py).
# Everything lands in OUT/s9.tgz (a call returns at most 8 files).   bash benchmarks/device/s9_checks.sh OUT
set -u
out=${1:?OUT}; w=$(mktemp -d); mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
AUTOCUTLASS_DB=$w/tests.sqlite timeout 150 python -m pytest -q -p no:warnings -m gpu -n 12 \
    "tests/test_gpu_dispatch.py::test_second_process_uses_stored_result_without_tuning_or_compiling" \
    "tests/test_gpu_dispatch.py::test_linear_residual" tests/test_gpu_conv_backward.py tests/test_gpu_torch_ops.py \
    tests/test_cold_start.py >"$w/gpu-tests.txt" 2>&1
stamp "gpu tests: $(tail -1 "$w/gpu-tests.txt")"
grep -E "^(FAILED|ERROR)" "$w/gpu-tests.txt" | head -20 >&2
for reads in 1 0; do
    AUTOCUTLASS_DB_SQLITE_READS=$reads timeout 90 python benchmarks/probes/cold_start.py --no-cold --repeats 2 \
        --cases square,decode --json "$w/cold-start-sqlite-reads$reads.json" >"$w/cold-start-sqlite-reads$reads.log" 2>&1
    stamp "cold start (sqlite reads $reads): $(tail -4 "$w/cold-start-sqlite-reads$reads.log" | tr '\n' ' ' | cut -c1-700)"
done
AUTOCUTLASS_POLICY=cached AUTOCUTLASS_DB=$w/user.sqlite timeout 100 python benchmarks/probes/conv_train_probe.py \
    --models resnet50 --batch 32 --rounds 2 --steps 2 --json "$w/rn50-train-eager.json" >"$w/rn50-train-eager.log" 2>&1
stamp "rn50 train (eager path): $(grep -E '^resnet50' "$w/rn50-train-eager.log" | cut -c1-400)"
timeout 170 python benchmarks/probes/linear_residual_bench.py --trials 8 --rounds 5 \
    --cases l8b-o@8192,l8b-down@8192,l8b-o@8,l8b-down@1 --json "$w/linear-residual.json" >"$w/linear-residual.log" 2>&1
stamp "linear residual: $(tail -6 "$w/linear-residual.log" | tr '\n' ' ' | cut -c1-700)"
tar czf "$out/s9.tgz" -C "$w" --exclude='*.sqlite*' .
stamp done
