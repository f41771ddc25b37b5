#!/usr/bin/env bash
# Session 40, call b: benchmarks/shapes-residue.json (12 GEMMs of my own, never tuned before, whose M or N
# leaves a partial wave) tuned at 16 trials each into a fresh file, as a miss is on first sight, with the
# swapped data-parallel orientation in the space and the cost model's picks; then benched against
# torch.matmul from that file (policy cached). The trials say per shape what the best swapped and the best
# unswapped config measured.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
db=$k/tuned.sqlite
timeout "${TUNE_TMO:-400}" python -m autocutlass.cli tune --shapes benchmarks/shapes-residue.json --trials 16 --timeout 40 \
  --db "$db" --json "$k/tune.json" >"$k/tune.txt" 2>"$k/log.txt"
echo "tune: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
cp "$db" "$OUT/user.sqlite"
export AUTOCUTLASS_DB=$OUT/user.sqlite
[ "${BENCH:-1}" = 1 ] && timeout 120 python -m autocutlass.cli bench --shapes benchmarks/shapes-residue.json --policy cached --no-first-call \
  --rounds 5 --out "$k/bench-residue" >"$k/bench-residue.txt" 2>>"$k/log.txt"
echo "bench: rc $? $(grep geomean "$k/bench-residue.txt" | cut -c1-200)"
grep -v "^tuned on" "$k/tune.txt" | cut -c1-200
grep -v "^hit-path" "$k/bench-residue.txt" | cut -c1-150
python benchmarks/device/best_by_side.py "$db"
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s40b.tar.gz keep/ && rm -rf keep)
