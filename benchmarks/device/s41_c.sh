#!/usr/bin/env bash
# Session 41, call c (after s40_a/b): the suite's and the M-residue list's losers re-tuned with the swapped
# orientation data-parallel in the space (session 40) into a fresh file, 24 trials each, for a merge into the
# shipped H200 file (a record replaced only by a faster one); prints each shape's best swapped and unswapped trial.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
python - <<'P' > "$k/losers.json"
import json
keep = {"ns-4608x1152x4096", "ns-1300x4096x4096", "ns-2100x14336x4096", "ns-3100x4096x8192", "ns-1100x8192x4096",
        "odd", "llama8b-o"}
cases = [c for f in ("benchmarks/shapes-nsplit.json", "benchmarks/shapes.json") for c in json.load(open(f))["cases"]
         if c["name"] in keep]
print(json.dumps({"about": "session 41 call c: the losers", "cases": cases}))
P
db=$k/tuned.sqlite
timeout "${TUNE_TMO:-450}" python -m autocutlass.cli tune --shapes "$k/losers.json" --trials "${TRIALS:-24}" --timeout 45 \
  --db "$db" --json "$k/tune.json" >"$k/tune.txt" 2>"$k/log.txt"
echo "tune: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
grep -v "^tuned on" "$k/tune.txt" | cut -c1-230
python benchmarks/device/best_by_side.py "$db"
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s41c.tar.gz keep/ && rm -rf keep)
