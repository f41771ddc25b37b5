#!/usr/bin/env bash
# Session 26, call 2 (an H100): the 3x3 wgrad layers whose seeds now start with a wave-filling split
# count (or whose shipped record the s26_a.sh probe beat), tuned at 16 trials into a fresh database,
# OUT/tuned.sqlite; then that database merged into the shipped H100 file (the faster record of each
# problem) and the conv suite's wgrad directions benched from it under policy cached.
#   bash benchmarks/device/s26_b.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
db=$out/tuned.sqlite
rn=benchmarks/shapes-conv-resnet50.json; suite=benchmarks/shapes-conv.json
only() { for n in "$@"; do printf -- "--only %s/wgrad " "$n"; done; }
tune() {  # tag file names...
  local tag=$1 file=$2; shift 2
  AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off timeout 170 python -m autocutlass.cli tune \
    --shapes "$file" --family hopper_conv_wgrad $(only "$@") --trials 16 --db "$db" \
    --json "$out/tune-$tag.json" >>"$out/tune.txt" 2>>"$out/log.txt"
  stamp "tune $tag: rc $?"
}
tune suite $suite rn50-l1-3x3 rn50-b8-3x3-64 rn50-l2-3x3 rn50-l2-3x3-s2 rn50-l3-3x3 rn50-l3-3x3-b128 vae-256@512 sd-320@64
tune rn50 $rn rn50-b128-l1-3x3 rn50-b128-l2-3x3-s2 rn50-b128-l2-3x3 rn50-b128-l3-3x3-s2 rn50-b128-l4-3x3-s2 rn50-b128-l4-3x3
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$out/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$out/merge.txt")"
cp "$out/merged.sqlite" "$ship"
AUTOCUTLASS_DB=$out/user.sqlite timeout 170 python -m autocutlass.cli bench --shapes $suite --only '*/wgrad' \
  --policy cached --no-first-call --rounds 3 --out "$out/bench-wgrad" >"$out/bench-wgrad.txt" 2>>"$out/log.txt"
stamp "bench wgrad: rc $? $(grep geomean "$out/bench-wgrad.txt" | cut -c1-150)"
rm -f "$out/merged.sqlite" "$out"/user.sqlite*
(cd "$out" && tar czf tune-json.tar.gz tune-*.json && rm -f tune-*.json)
grep -E "x torch|^rn50|^vae|^sd" "$out/tune.txt" | cut -c1-160
cut -c1-24,108-175 "$out/bench-wgrad.txt" | head -24
