#!/usr/bin/env bash
# Session 29, an H200: the H200 file's 24 records that session 25's kernel changes retired (7 long-K GEMMs, the
# suite's pointwise rn50-l3-1x1 wgrad as a GEMM, 16 ResNet-50 b128 wgrad layers) tuned again, and the conv suite's
# forward layers the H200 serves below cuDNN or below the H100's record, each search starting from the databases'
# priors (the H100 file's record of the problem as a sibling's first), into a fresh database OUT/keep/tuned.sqlite.
#   bash benchmarks/device/s29_c.sh OUT    (about 9 minutes; exits 3 on any GPU but an H200)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
case "$gpu" in *H200*) ;; *) echo "not an H200: nothing run" >&2; exit 3;; esac
db=$k/tuned.sqlite
only() { for n in "$@"; do printf -- "--only %s " "$n"; done; }
tune() {  # tag seconds trials file family names...
  local tag=$1 secs=$2 trials=$3 file=$4 fam=$5; shift 5
  timeout "$secs" python -m autocutlass.cli tune --shapes "$file" ${fam:+--family $fam} $(only "$@") --trials "$trials" \
    --db "$db" --json "$k/tune-$tag.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $tag: rc $?"
}
rn=benchmarks/shapes-conv-resnet50.json; suite=benchmarks/shapes-conv.json
pw="rn50-b128-pw-14-1024-256 rn50-b128-pw-14-1024-512 rn50-b128-pw-14-256-1024 rn50-b128-pw-28-128-512
    rn50-b128-pw-28-512-128 rn50-b128-pw-28-512-256 rn50-b128-pw-56-256-128 rn50-b128-pw-56-256-64
    rn50-b128-pw-56-64-256 rn50-b128-pw-56-64-64"
w() { for n in "$@"; do printf "%s/wgrad " "$n"; done; }
tune fprop 150 8 $suite "" sd-1280@16/fprop rn50-l4-3x3/fprop rn50-l4-3x3-b256/fprop vae-512@128/fprop rn50-l3-3x3-b128/fprop
tune rn50-wgrad 230 6 $rn hopper_conv_wgrad $(w rn50-b128-l1-3x3 rn50-b128-l2-3x3-s2 rn50-b128-l2-3x3 rn50-b128-l2-down \
  rn50-b128-l3-3x3-s2 rn50-b128-l3-down $pw)
tune gemm 100 6 benchmarks/shapes-longk.json "" longk-384x384 longk-256x512 longk-768x768 longk-512x256 longk-320x640
tune gemm2 50 6 benchmarks/shapes-online.json "" large-k large-k-2
tune pw 30 6 $suite hopper_gemm rn50-l3-1x1/wgrad
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
cp "$db" "$out/tuned-s29c.sqlite"
(cd "$out" && tar czf s29c.tar.gz keep/)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
