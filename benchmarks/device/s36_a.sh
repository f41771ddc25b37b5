#!/usr/bin/env bash
# Session 36, call a: fan-in split-K (SplitMode.FANIN) on the GPU: its tests (GEMM, conv fprop,
# conv wgrad: correctness, the serial chain's bits, determinism), then benchmarks/probes/fanin_probe.py
# on the few-tile, long-K problems (wgrad of the suite's narrow layers, rn50-l4-3x3 fprop, the
# long-K GEMM file) against the shipped H200 records and the vendor.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
run() {  # name, timeout, command...
  local name=$1 t=$2; shift 2
  timeout "$t" "$@" > "$OUT/$name.txt" 2>&1; echo "$name rc=$?"; tail -2 "$OUT/$name.txt"
}
run gpu-tests-gemm 300 python -m pytest -q -p no:cacheprovider tests/test_gpu_kernels.py \
  -k "sk5f or sk4f or sk3f or sk16f or sk11f or (deterministic and fanin) or serial_chain or (scratch and fanin)"
run gpu-tests-conv 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv.py -k "sk4f or sk5f"
run gpu-tests-wgrad 300 python -m pytest -q -p no:cacheprovider "tests/test_gpu_conv_backward.py::test_wgrad_kernel[13]" "tests/test_gpu_conv_backward.py::test_wgrad_kernel[14]" \
  tests/test_gpu_conv_backward.py::test_pointwise_backward_on_the_gemm_family
C=benchmarks/shapes-conv.json
L=benchmarks/shapes-longk.json
run probe 420 python benchmarks/probes/fanin_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 5 \
  --case $C:rn50-l3-1x1/wgrad --case $C:rn50-l1-1x1-up/wgrad --case $C:rn50-l3-3x3/wgrad \
  --case $C:rn50-l1-3x3/wgrad --case $C:rn50-b8-3x3-64/wgrad --case $C:rn50-l4-3x3/wgrad \
  --case $C:rn50-l4-3x3/fprop --case $C:rn50-l3-3x3-b128/fprop \
  --case $L:longk-384x384 --case $L:longk-256x512 --case $L:longk-512x256 --case $L:longk-320x640 \
  --json "$OUT/probe.json"
grep -E "^case|x[0-9]" "$OUT/probe.txt" | tail -14
