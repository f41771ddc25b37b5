#!/usr/bin/env bash
# For the next session, after s22_a.sh (any GPU; run once per GPU model): every record of this
# GPU's shipped database re-timed against torch with `tune --verdicts` (no search), so that its
# vendor verdicts hold host times. OUT/db.sqlite is the shipped file as the device got it (its
# trials thinned to the best records' for the carry) with the re-timed records: merge it into the
# full file with `autocutlass db merge tuning_dbs/<GPU>.sqlite OUT/db.sqlite -o NEW --replace` (B's
# re-timed bests and verdicts replace A's; a plain merge would keep the faster of two times of a best
# and drop the verdict re-timed with the slower), then `tune --export-shipped`, `db readme` and
# `kernels warm` as usual. Records of other kernel sources are left alone; 4 files come back.
#   bash benchmarks/device/s22_b.sh OUT    (up to 9 minutes; run it again on its own OUT/db.sqlite
#   with the `--verdicts FILE` of what is left if it times out)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$out/db.sqlite
cp "tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite" "$db" || { echo "no shipped database for $gpu" >&2; exit 3; }
timeout 540 python -m autocutlass.cli tune --verdicts --db "$db" --json "$out/verdicts.json" >"$out/verdicts.txt" \
    2>"$out/log.txt"
stamp "verdicts: rc $? $(tail -1 "$out/verdicts.txt")"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
