#!/usr/bin/env bash
# Session 27, call 1 (an H100): the unfolded convolutions (layers whose input channels are not whole
# 16-byte units: the 3-channel ResNet stem) on the GPU: their GPU tests, then the stem's fprop and wgrad
# tuned at 24 trials (the conv suite's batch 32, ResNet-50's batch 128) into a fresh database,
# OUT/tuned.sqlite.
#   bash benchmarks/device/s27_a.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 200 python -m pytest -q -m gpu tests/test_gpu_conv_unfold.py -p no:cacheprovider >"$out/gpu-tests-unfold.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-unfold.txt")"
db=$out/tuned.sqlite
tune() {  # tag file names...
  local tag=$1 file=$2; shift 2
  AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off timeout 170 python -m autocutlass.cli tune \
    --shapes "$file" $(for n in "$@"; do printf -- "--only %s " "$n"; done) --trials 24 --db "$db" \
    --json "$out/tune-$tag.json" >>"$out/tune.txt" 2>>"$out/log.txt"
  stamp "tune $tag: rc $?"
}
tune suite benchmarks/shapes-conv.json rn50-stem rn50-stem/wgrad
tune rn50 benchmarks/shapes-conv-resnet50.json rn50-b128-stem rn50-b128-stem/wgrad
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
grep -E "x torch|stem" "$out/tune.txt" | cut -c1-200
tail -4 "$out/gpu-tests-unfold.txt"
