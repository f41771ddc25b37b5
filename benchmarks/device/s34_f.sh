#!/usr/bin/env bash
# Session 34, call f (H200): the public suite's `odd` GEMM (2000x3000x1000), which our record serves at x0.91 of
# torch (the host-aware verdict keeps it: ours 27.3 + 5.7 us host, torch 25.1 + 11.3): bench, a 48-trial tune from
# the priors into a fresh database, merged on the machine, bench again.
#   bash benchmarks/device/s34_f.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
db=$k/tuned.sqlite
ship=tuning_dbs/NVIDIA-H200.sqlite
export AUTOCUTLASS_DB=$out/user.sqlite
for f in before; do
  timeout 60 python -m autocutlass.cli bench --shapes benchmarks/shapes.json --only odd --policy cached --no-first-call \
    --rounds 7 --out "$k/bench-odd-$f" >"$k/bench-odd-$f.txt" 2>>"$k/log.txt"; rm -f "$out"/user.sqlite*
done
timeout 200 python -m autocutlass.cli tune --shapes benchmarks/shapes.json --only odd --trials 48 --family hopper_gemm \
  --db "$db" --json "$k/tune-odd.json" >"$k/tune.txt" 2>>"$k/log.txt"
stamp "tune odd: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1 && cp "$out/merged.sqlite" "$ship"
timeout 60 python -m autocutlass.cli bench --shapes benchmarks/shapes.json --only odd --policy cached --no-first-call \
  --rounds 7 --out "$k/bench-odd-after" >"$k/bench-odd-after.txt" 2>>"$k/log.txt"
(cd "$out" && rm -f merged.sqlite user.sqlite* && tar czf s34f.tar.gz keep/)
cat "$k/tune.txt" | cut -c1-170
grep -h "^odd\|geomean" "$k"/bench-odd-*.txt | cut -c1-170
