#!/usr/bin/env bash
# Session 38, call a (H200): wide accumulator tiles (up to 192 fp32 registers per consumer thread,
# hopper_gemm/check.py ACC_REGS_WIDE): 256x192 and 256x160 cooperative, 128x192 and 128x160 ping-pong,
# against each case's shipped record and torch.matmul (config_probe: verified with NaN-poisoned outputs,
# interleaved rounds, L2 flushed, medians), on the public suite's large and odd cases and issue 21's classes.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
S=benchmarks/shapes.json; O=benchmarks/shapes-online.json; F=benchmarks/shapes-fitted.json
cfgs=()
for c in '"tile_m":256,"tile_n":192' '"tile_m":256,"tile_n":192,"cluster_m":2' '"tile_m":256,"tile_n":192,"cluster_n":2' \
         '"tile_m":256,"tile_n":192,"raster":"along_n"' '"tile_m":256,"tile_n":160,"cluster_m":2' \
         '"tile_m":128,"tile_n":192,"schedule":"pingpong"' '"tile_m":128,"tile_n":192,"schedule":"pingpong","cluster_m":2' \
         '"tile_m":128,"tile_n":160,"schedule":"pingpong"'; do
  cfgs+=(--config "hopper_gemm:{$c}")
done
timeout 560 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 5 \
  --case $S:odd --case $S:square-8k --case $S:llama8b-qkv --case $S:llama8b-down --case $S:square-4k \
  --case $S:llama8b-o --case $O:m-above-tile-2 --case $F:fit-3072x6144 --case $F:fit-6144x2304 \
  --case $O:colmajor-a-2 --case $S:llama8b-gateup \
  "${cfgs[@]}" --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "us  vendor|NOT VER|failed" "$k/probe.txt" | cut -c1-200
tail -14 "$k/probe.txt"
(cd "$OUT" && tar czf s38a.tar.gz keep/ && rm -rf keep)
