#!/usr/bin/env bash
# Session 37, call b (H200): the unfold family's GPU tests (the padded channels and the new 132-split cases, never
# run before), the stem's wgrad with 66 and 132 workspace splits (config.SPLIT_MAX) beside the shipped record
# (call a's) and cuDNN, and the unfold wgrad family tuned on the layer again under the new source (24 trials).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
timeout 240 python -m pytest -q -m gpu tests/test_gpu_conv_unfold.py >"$k/tests.txt" 2>&1
echo "tests: rc $? $(tail -1 "$k/tests.txt")"
cfgs=()
while read -r spec; do [ -n "$spec" ] && cfgs+=(--config "$spec"); done <<'CFGS'
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_n":192,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"split_k":132,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","rows":3}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_n":256,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"split_k":132,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","rows":2,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_n":256,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"split_k":66,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","rows":1,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_n":256,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"split_k":132,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","slab_groups":4,"rows":2,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_n":256,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"split_k":66,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","slab_groups":4,"rows":1,"channels":64}
hopper_conv_wgrad_unfold:{"tile_m":64,"tile_n":192,"tile_k":64,"cluster_m":1,"cluster_n":1,"stages":0,"schedule":"cooperative","raster":"along_m","swizzle":1,"split_k":132,"stream_k":false,"store":"tma","tap_channels":64,"split_mode":"workspace","slab_groups":4,"rows":3}
CFGS
timeout 120 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 7 \
  --case $C:rn50-stem/wgrad "${cfgs[@]}" --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
db=$k/tuned.sqlite
timeout 150 python -m autocutlass.cli tune --shapes $C --only rn50-stem/wgrad --trials 24 \
  --family hopper_conv_wgrad_unfold --db "$db" --json "$k/tune.json" >>"$k/tune.txt" 2>>"$k/log.txt"
echo "tune: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
grep -E "passed|failed|FAILED|Error" "$k/tests.txt" | tail -5 | cut -c1-200
grep -E "us  vendor|NOT VER|failed" "$k/probe.txt" | cut -c1-150
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-220
(cd "$OUT" && tar czf s37b.tar.gz keep/ && rm -rf keep)
