#!/usr/bin/env bash
# Session 25, call 3: (1) the conv-backward GPU tests with the new wgrad slab sum (4 columns a
# thread, PDL); (2) the long-K GEMMs whose workspace split-K records the new reduce kernel retired
# (benchmarks/shapes-longk.json, shapes-online.json's large-k and large-k-2) tuned at 16 trials into
# a fresh database, OUT/tuned.sqlite (merge it into the rekeyed shipped file with db merge --replace).
#   bash benchmarks/device/s25_c.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off
db=$out/tuned.sqlite
timeout 150 python -m autocutlass.cli tune --shapes benchmarks/shapes-longk.json --trials 16 --db "$db" \
  --json "$out/tune-longk.json" >"$out/tune.txt" 2>"$out/log.txt"
stamp "tune longk: rc $?"
timeout 80 python -m autocutlass.cli tune --shapes benchmarks/shapes-online.json --only large-k --only large-k-2 \
  --trials 16 --db "$db" --json "$out/tune-online.json" >>"$out/tune.txt" 2>>"$out/log.txt"
stamp "tune online: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
AUTOCUTLASS_CACHE_DIR=$(mktemp -d) timeout 300 python -m pytest -q -x tests/test_gpu_conv_backward.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests conv backward: rc $? $(tail -1 "$out/gpu-tests.txt")"
grep -E "x torch|x vs|geomean|^[a-z]" "$out/tune.txt" | tail -20
