#!/usr/bin/env bash
# Session 39, call c (H200): where the M-residue GEMMs still lose after call b's 16-trial tune.
# 1. config_probe of call b's records against torch on the six losers, kernel by kernel (--kernels: cuBLAS's
#    kernel names, i.e. its tile shapes and clusters);
# 2. those six re-tuned at 48 trials into a fresh file (merged later with call b's).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
N=benchmarks/shapes-nsplit.json
cases=(--case $N:ns-2000x3000x1000 --case $N:ns-4608x1152x4096 --case $N:ns-2100x14336x4096
       --case $N:ns-1100x8192x4096 --case $N:ns-1300x4096x4096 --case $N:ns-3100x4096x8192)
timeout 200 python benchmarks/probes/config_probe.py --db s39b-tuned.sqlite --workers 15 --rounds 5 --kernels 3 \
  "${cases[@]}" --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
grep "kernels:" "$k/probe.txt" | cut -c1-260
python - <<'P' > "$k/losers.json"
import json
d = json.load(open("benchmarks/shapes-nsplit.json"))
keep = {"ns-2000x3000x1000", "ns-4608x1152x4096", "ns-2100x14336x4096", "ns-1100x8192x4096", "ns-1300x4096x4096", "ns-3100x4096x8192"}
print(json.dumps({"about": "call c's losers", "cases": [c for c in d["cases"] if c["name"] in keep]}))
P
db=$k/tuned.sqlite
timeout 330 python -m autocutlass.cli tune --shapes "$k/losers.json" --trials 48 --timeout 45 \
  --db "$db" --json "$k/tune.json" >"$k/tune.txt" 2>"$k/log.txt"
echo "tune: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
grep -v "^tuned on" "$k/tune.txt" | cut -c1-230
(cd "$OUT" && tar czf s39c.tar.gz keep/ && rm -rf keep)
