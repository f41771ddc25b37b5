#!/usr/bin/env bash
# Session 25, call 5 (an H200): the H200's records that the new reduce kernel and wgrad slab sum
# retired, tuned at 16 trials into fresh databases: the long-K GEMMs (as s25_c.sh, without its GPU
# tests) into OUT/tuned-gemm.sqlite, and the wgrad problems (s25_d.sh) into OUT/w/tuned.sqlite.
# Its first run (ANY_GPU=1, before the guard) landed on an H100: the H100 file keeps the faster of
# that run's records and s25_c/d.sh's.
#   bash benchmarks/device/s25_e.sh OUT    (about 8 minutes; exits 3 on any GPU but an H200)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
case "$gpu" in *H200*) ;; *) [ -n "${ANY_GPU:-}" ] || { echo "not an H200: nothing run (ANY_GPU=1 runs it anyway)" >&2; exit 3; };; esac
export AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off
db=$out/tuned-gemm.sqlite
timeout 150 python -m autocutlass.cli tune --shapes benchmarks/shapes-longk.json --trials 16 --db "$db" \
  >"$out/tune-gemm.txt" 2>"$out/log.txt"
stamp "tune longk: rc $?"
timeout 80 python -m autocutlass.cli tune --shapes benchmarks/shapes-online.json --only large-k --only large-k-2 \
  --trials 16 --db "$db" >>"$out/tune-gemm.txt" 2>>"$out/log.txt"
stamp "tune online: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
bash benchmarks/device/s25_d.sh "$out/w" >/dev/null
grep -E "^(longk|large)" "$out/tune-gemm.txt"
grep -E "^(rn50|vae)" "$out/w/tune.txt" | cut -c1-200
