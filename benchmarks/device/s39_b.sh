#!/usr/bin/env bash
# Session 39, call b (H200): the corrected N-split GPU case (192x160: 80-column halves) and the 192-row
# kernel cases beside it; then benchmarks/shapes-nsplit.json (10 GEMMs of M a few rows past a tile multiple)
# tuned with the 192-row tiles in the space and the seeds (16 trials each, priors from the shipped file) into
# a fresh file, merged on this machine into the rekeyed shipped file (a record is replaced only by a faster one).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_gpu_kernels.py -k "192x" >"$k/gpu-tests.txt" 2>&1
echo "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
grep -E "^FAILED|Error:" "$k/gpu-tests.txt" | head -5 | cut -c1-250
rm -f "$OUT"/user.sqlite*
unset AUTOCUTLASS_DB
db=$k/tuned.sqlite
timeout 400 python -m autocutlass.cli tune --shapes benchmarks/shapes-nsplit.json --trials 16 --timeout 45 \
  --db "$db" --json "$k/tune.json" >"$k/tune.txt" 2>"$k/log.txt"
echo "tune: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
grep -v "^tuned on" "$k/tune.txt" | cut -c1-230
(cd "$OUT" && tar czf s39b.tar.gz keep/ && rm -rf keep)
