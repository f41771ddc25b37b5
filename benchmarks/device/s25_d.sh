#!/usr/bin/env bash
# Session 25, call 4: the wgrad problems whose workspace split-K records the new slab sum and the
# new reduce kernel retired (hopper_conv_wgrad and, for the pointwise layers, hopper_gemm), tuned at
# 16 trials into a fresh database, OUT/tuned.sqlite (merge it into the rekeyed shipped file).
#   bash benchmarks/device/s25_d.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off
db=$out/tuned.sqlite
rn=benchmarks/shapes-conv-resnet50.json; suite=benchmarks/shapes-conv.json
pw="rn50-b128-pw-14-1024-256 rn50-b128-pw-14-1024-512 rn50-b128-pw-14-256-1024 rn50-b128-pw-28-128-512
    rn50-b128-pw-28-512-128 rn50-b128-pw-28-512-256 rn50-b128-pw-56-256-128 rn50-b128-pw-56-256-64
    rn50-b128-pw-56-64-256 rn50-b128-pw-56-64-64"
only() { for n in "$@"; do printf -- "--only %s/wgrad " "$n"; done; }
tune() {  # tag file family names...
  local tag=$1 file=$2 fam=$3; shift 3
  timeout 200 python -m autocutlass.cli tune --shapes "$file" --family "$fam" $(only "$@") --trials 16 --db "$db" \
    --json "$out/tune-$tag.json" >>"$out/tune.txt" 2>>"$out/log.txt"
  stamp "tune $tag: rc $?"
}
tune rn50-wgrad $rn hopper_conv_wgrad rn50-b128-l1-3x3 rn50-b128-l2-3x3-s2 rn50-b128-l2-3x3 rn50-b128-l2-down \
  rn50-b128-l3-3x3-s2 rn50-b128-l3-down $pw
tune rn50-gemm $rn hopper_gemm $pw
tune suite-wgrad $suite hopper_conv_wgrad rn50-b8-3x3-64 rn50-l1-1x1-up rn50-l1-3x3 rn50-l2-3x3-s2 rn50-l2-3x3 \
  rn50-l3-1x1 rn50-l3-3x3-b128 rn50-l3-3x3 vae-256@512
tune suite-gemm $suite hopper_gemm rn50-l1-1x1-up rn50-l3-1x1
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
(cd "$out" && tar czf tune-json.tar.gz tune-*.json && rm -f tune-*.json)
grep -E "x torch|^rn50|^vae" "$out/tune.txt" | cut -c1-200
