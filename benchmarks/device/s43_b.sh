#!/usr/bin/env bash
# Session 43, call b (either GPU): torch's "heuristic" variant (cuDNN outside benchmark mode, PyTorch's
# default) timed for the first time: `autocutlass tune --verdicts` over the conv suite's records of this GPU's
# shipped file, a direction at a time (each record's config against torch in both cuDNN modes in interleaved
# finals, recorded as the vendor records of both modes; the refreshed file comes back under $OUT after each
# direction). The forward is benched right after its verdicts, as a user gets the file (policy cached), ours
# timed once per cuDNN mode on that mode's thread; then the backward directions' verdicts. Worst case about
# 550 s.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
ship=$(python -c "import re, torch; print('tuning_dbs/' + re.sub(r'[^A-Za-z0-9]+', '-', torch.cuda.get_device_name()).strip('-') + '.sqlite')")
echo "shipped file: $ship"
save() {  # the refreshed file, whole, under $OUT after each direction (a run cut short keeps what it did)
  python -c "import sqlite3; c = sqlite3.connect('$ship'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
  rm -f "$ship-wal" "$ship-shm"
  cp "$ship" "$OUT/"; mkdir -p build && cp "$ship" build/s43-refreshed.sqlite  # for call c on this machine
}
verdicts() {  # $1 direction, $2 seconds
  timeout $2 python -m autocutlass.cli tune --verdicts $C --only "*/$1" --db "$ship" --json "$k/verdicts-$1.json" \
    >"$k/verdicts-$1.txt" 2>>"$k/log.txt"
  echo "verdicts $1: rc $? $(tail -1 "$k/verdicts-$1.txt")"
  save
}
verdicts fprop 140
AUTOCUTLASS_DB=$OUT/user.sqlite timeout 165 python -m autocutlass.cli bench --shapes $C --only "*/fprop" \
  --policy cached --no-first-call --rounds 5 --out "$k/bench-fprop" >"$k/bench-fprop.txt" 2>>"$k/log.txt"
echo "bench fprop: rc $? $(grep geomean "$k/bench-fprop.txt" | cut -c1-230)"
rm -f "$OUT"/user.sqlite*
verdicts wgrad 120
verdicts dgrad 120
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s43b.tar.gz keep/ && rm -rf keep)
