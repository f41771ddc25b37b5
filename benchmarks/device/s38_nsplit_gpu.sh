#!/usr/bin/env bash
# For the session after 38, once benchmarks/device/s38_nsplit.patch is applied (git am) — written in session 38,
# which had no device time left to run it: the 192-row tiles split along N (HopperGemmConfig.n_split) on an H200.
# 1. tests/test_gpu_kernels.py's nine 192-row cases (residues, both B layouts, batched, clusters, epilogues with
#    bias / activation / C, direct store, fp16, fp8, swapped) and the wide and split-K cases beside them;
# 2. config_probe on the M-residue and few-tile shapes with 192x128 / 192x256 (cuBLAS's 'odd' kernel is 192x128
#    in a 1x2 cluster: benchmarks/results/2026-11-28-h200-s38-i-ncu-odd.txt) against the shipped records.
# Then, if they win: `db rekey` both shipped files (the patch leaves every existing config's objects byte-equal:
# 7 sampled configs compared on the CPU in session 38), tune benchmarks/shapes.json's odd and shapes-online.json's
# m-above-tile cases with the new seeds, regenerate kernels.tar.xz and tuning_dbs/README.md.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 240 python -m pytest -q -p no:cacheprovider tests/test_gpu_kernels.py -k "192x or 256x192 or sk" \
  >"$k/gpu-tests.txt" 2>&1
echo "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
rm -f "$OUT"/user.sqlite*
S=benchmarks/shapes.json; O=benchmarks/shapes-online.json; F=benchmarks/shapes-fitted.json
cfgs=()
for c in '"tile_m":192,"tile_n":128' '"tile_m":192,"tile_n":128,"cluster_n":2' '"tile_m":192,"tile_n":128,"cluster_m":2' \
         '"tile_m":192,"tile_n":256' '"tile_m":192,"tile_n":256,"cluster_n":2' '"tile_m":192,"tile_n":176,"cluster_n":2'; do
  cfgs+=(--config "hopper_gemm:{$c}")
done
timeout 300 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 5 \
  --case $S:odd --case $O:m-above-tile --case $O:m-above-tile-2 --case $O:few-tiles --case $F:fit-2304x3072 \
  --case $F:fit-4608x1152 --case $S:llama8b-o "${cfgs[@]}" --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "FAILED|Error" "$k/gpu-tests.txt" | head -10 | cut -c1-250
grep -E "us  vendor|NOT VER|failed" "$k/probe.txt" | cut -c1-200
tail -9 "$k/probe.txt"
(cd "$OUT" && tar czf nsplit.tar.gz keep/ && rm -rf keep)
