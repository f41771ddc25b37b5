#!/usr/bin/env bash
# Session 38, call b (H200): the GEMMs of the shipped H200 file whose wide 256x192 tile the wave model ranks
# within 3.5% of the cheapest (benchmarks/shapes-wide-tiles.json, 15 problems) re-tuned with the wide tiles in
# the space and the seeds (10 trials each, priors from the shipped file), merged on the machine into the
# shipped file (a record is replaced only by a faster one).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
db=$k/tuned.sqlite
timeout 520 python -m autocutlass.cli tune --shapes benchmarks/shapes-wide-tiles.json --trials 10 --timeout 45 \
  --db "$db" --json "$k/tune.json" >"$k/tune.txt" 2>"$k/log.txt"
echo "tune: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
ship=tuning_dbs/NVIDIA-H200.sqlite
python -m autocutlass.cli db merge "$ship" "$db" -o "$k/merged.sqlite" >"$k/merge.txt" 2>&1
echo "merge: rc $? $(tail -1 "$k/merge.txt")"
grep -v "^tuned on" "$k/tune.txt" | cut -c1-230
(cd "$OUT" && tar czf s38b.tar.gz keep/ && rm -rf keep)
