#!/usr/bin/env bash
# Session 28, calls 6 and 7 (an H100): the conv suite's wgrad layers named on the command line tuned at 24 trials
# into a fresh database with hopper_conv_wgrad's tiles across the taps in its space; the database and the tune's
# output come back in one archive.
#   bash benchmarks/device/s28_f.sh OUT NAME...    (about 50 s a layer)
set -u
out=${1:?OUT}; shift; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
db=$k/tuned.sqlite
for name in "$@"; do
  AUTOCUTLASS_SHIPPED_KERNELS=off AUTOCUTLASS_SHIPPED_DBS=off timeout 100 python -m autocutlass.cli tune \
    --shapes benchmarks/shapes-conv.json --only "$name/wgrad" --trials 24 --db "$db" \
    --json "$k/tune-$name.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
(cd "$out" && tar czf s28f.tar.gz keep/)
grep -E "wgrad" "$k/tune.txt" | grep -v "^case" | cut -c1-220
tail -3 "$k/log.txt" | cut -c1-300
