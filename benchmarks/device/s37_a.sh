#!/usr/bin/env bash
# Session 37, call a (H200): the stem's wgrad with the unfold family's padded channels (C' = 64, tiles across the
# taps; commit 6b7eb9e, never run on a GPU before): given configs beside the shipped record and cuDNN
# (config_probe), the unfold wgrad family tuned on the layer (24 trials), merged on the machine into the shipped
# file (the faster record kept), and the wgrad suite as a user gets that file.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
cfgs=()
while read -r spec; do [ -n "$spec" ] && cfgs+=(--config "$spec"); done <<'CFGS'
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","tile_n":256,"rows":2,"split_k":64,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","tile_n":256,"rows":2,"split_k":64,"slab_groups":4,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","tile_n":256,"rows":2,"split_k":33,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":true,"store":"tma","tap_channels":64,"split_mode":"serial","tile_n":256,"rows":2,"split_k":1,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","tile_n":192,"rows":3,"split_k":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":true,"store":"tma","tap_channels":64,"split_mode":"serial","tile_n":192,"rows":3,"split_k":1}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","tile_n":128,"rows":2,"split_k":64,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","tile_n":128,"rows":2,"split_k":33,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":true,"store":"tma","tap_channels":64,"split_mode":"serial","tile_n":128,"rows":2,"split_k":1,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","tile_n":256,"rows":1,"split_k":64,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"stream_k":true,"store":"tma","tap_channels":64,"split_mode":"serial","tile_n":256,"rows":1,"split_k":1,"channels":64}
CFGS
timeout 150 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 7 \
  --case $C:rn50-stem/wgrad "${cfgs[@]}" --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
db=$k/tuned.sqlite
timeout 170 python -m autocutlass.cli tune --shapes $C --only rn50-stem/wgrad --trials 24 \
  --family hopper_conv_wgrad_unfold --db "$db" --json "$k/tune.json" >>"$k/tune.txt" 2>>"$k/log.txt"
echo "tune: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H200.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$OUT/merged.sqlite" >"$k/merge.txt" 2>&1
echo "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$OUT/merged.sqlite" "$ship"
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 140 python -m autocutlass.cli bench --shapes $C --only "*/wgrad" --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-wgrad" >"$k/bench-wgrad.txt" 2>>"$k/log.txt"
echo "bench wgrad: rc $? $(grep geomean "$k/bench-wgrad.txt" | cut -c1-150)"
grep -E "us  vendor|NOT VER|failed" "$k/probe.txt" | cut -c1-150
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-220
grep -E "rn50-stem" "$k/bench-wgrad.txt" | cut -c1-200
(cd "$OUT" && tar czf s37a.tar.gz keep/ && rm -rf keep user.sqlite*)
