#!/usr/bin/env bash
# Session 41, call d (after call a: s40_a.sh + s40_b.sh on an H100): the tuner's and dispatch's GPU tests
# (the GEMM space/picks moved to their own modules; records that do not fit); then the M-residue losers
# (shapes-nsplit's six, the suite's odd and llama8b-o) at 24 trials and benchmarks/shapes-residue.json at 16,
# with the model's two swapped tile shapes and 192x224 among its tiles, into one fresh file; both lists
# benched from it (policy cached) against torch.matmul; each shape's best swapped and unswapped trial.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_search_gpu.py tests/test_gpu_dispatch.py >"$k/gpu-tests.txt" 2>&1
echo "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
python - <<'P' > "$k/losers.json"
import json
keep = {"ns-4608x1152x4096", "ns-1300x4096x4096", "ns-2100x14336x4096", "ns-3100x4096x8192", "ns-1100x8192x4096",
        "odd", "llama8b-o"}
cases = [c for f in ("benchmarks/shapes-nsplit.json", "benchmarks/shapes.json") for c in json.load(open(f))["cases"]
         if c["name"] in keep]
print(json.dumps({"about": "session 41 call d: the M-residue losers", "cases": cases}))
P
db=$k/tuned.sqlite
timeout 170 python -m autocutlass.cli tune --shapes "$k/losers.json" --trials 24 --timeout 40 \
  --db "$db" --json "$k/tune-losers.json" >"$k/tune-losers.txt" 2>"$k/log.txt"
echo "tune losers: rc $?"
timeout 130 python -m autocutlass.cli tune --shapes benchmarks/shapes-residue.json --trials 16 --timeout 40 \
  --db "$db" --json "$k/tune-residue.json" >"$k/tune-residue.txt" 2>>"$k/log.txt"
echo "tune residue: rc $?"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
export AUTOCUTLASS_DB=$OUT/user.sqlite
for f in losers residue; do
  cp "$db" "$OUT/user.sqlite"
  shapes=$k/losers.json; [ $f = residue ] && shapes=benchmarks/shapes-residue.json
  timeout 70 python -m autocutlass.cli bench --shapes "$shapes" --policy cached --no-first-call --rounds 5 \
    --out "$k/bench-$f" >"$k/bench-$f.txt" 2>>"$k/log.txt"
  echo "bench $f: rc $? $(grep geomean "$k/bench-$f.txt" | cut -c1-200)"
done
rm -f "$OUT"/user.sqlite*
for f in losers residue; do grep -v "^tuned on" "$k/tune-$f.txt" | cut -c1-160; done
for f in losers residue; do grep -v "^hit-path" "$k/bench-$f.txt" | cut -c1-140; done
python benchmarks/device/best_by_side.py "$db"
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s41d.tar.gz keep/ && rm -rf keep)
