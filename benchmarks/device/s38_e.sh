#!/usr/bin/env bash
# Session 38, call e (H200): the wide 256x192 tile with workspace split-K on few-tile, long-K GEMMs (fewer,
# larger tiles read the operands fewer times: 768x768 in 12 tiles of 256x192 against 36 of 128x128), against
# each case's shipped record and torch.matmul (config_probe: verified, interleaved rounds, L2 flushed, medians).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
L=benchmarks/shapes-longk.json; O=benchmarks/shapes-online.json
W='"tile_m":256,"tile_n":192,"split_mode":"workspace"'
cfgs=()
for c in "$W,\"split_k\":11" "$W,\"split_k\":11,\"interleave\":true" "$W,\"split_k\":11,\"cluster_n\":2" \
         "$W,\"split_k\":16" "$W,\"split_k\":16,\"interleave\":true" "$W,\"split_k\":2,\"cluster_n\":2" \
         "$W,\"split_k\":3" '"tile_m":256,"tile_n":192,"stream_k":true'; do
  cfgs+=(--config "hopper_gemm:{$c}")
done
timeout 400 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 5 \
  --case $L:longk-768x768 --case $L:longk-320x640 --case $O:few-tiles --case $O:few-tiles-2 --case $L:longk-384x384 \
  "${cfgs[@]}" --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "us  vendor|NOT VER|failed" "$k/probe.txt" | cut -c1-200
tail -7 "$k/probe.txt"
(cd "$OUT" && tar czf s38e.tar.gz keep/ && rm -rf keep)
