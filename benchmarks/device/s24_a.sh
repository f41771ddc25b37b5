#!/usr/bin/env bash
# For the next session (an H100): (1) the shipped H100 database's ResNet-50 b128 records re-timed
# against torch with `tune --verdicts` (session 23 made the wgrad runner's split-K scratch look-up
# 5-12 us cheaper per call, so the host times in their vendor records are stale; OUT/db.sqlite comes
# back: merge it with `db merge tuning_dbs/<gpu>.sqlite OUT/db.sqlite -o NEW --replace`); (2)
# ResNet-50 b128 training from the re-timed database against the shipped one, alternating
# processes, 2 pairs; (3) session 23's last seed change (the wave model's picks walk along N on
# tall tile grids, in 2x1, 1x2 and no cluster), CPU-tested only: benchmarks/shapes-tall.json and
# shapes-online.json tuned at 16 trials into a fresh database (OUT/tuned.sqlite). 8 files come back.
#   bash benchmarks/device/s24_a.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
shipped="tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite"
db=$out/db.sqlite
cp "$shipped" "$db" || { echo "no shipped database for $gpu" >&2; exit 3; }
timeout 300 python -m autocutlass.cli tune --verdicts benchmarks/shapes-conv-resnet50.json --db "$db" \
    --json "$out/verdicts.json" >"$out/verdicts.txt" 2>"$out/log.txt"
stamp "verdicts: rc $? $(tail -1 "$out/verdicts.txt")"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
for i in 1 2; do
  for which in retimed shipped; do
    use=$db; [ $which = shipped ] && use=$shipped
    AUTOCUTLASS_DB="$use" timeout 60 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 \
      2>>"$out/log.txt" | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'db': '$which', 'run': $i, 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'stats': r['stats_after']}))" >>"$out/train.jsonl"
    stamp "resnet50 $which run $i: $(tail -1 "$out/train.jsonl" | cut -c1-140)"
  done
done
tuned="$out/tuned.sqlite"
for f in tall online; do
  timeout 200 python -m autocutlass.cli tune --shapes "benchmarks/shapes-$f.json" --trials 16 --db "$tuned" \
      --json "$out/tune-$f.json" 2>>"$out/log.txt" | tail -13 >&2
  stamp "tune $f done"
done
python -c "import sqlite3; c = sqlite3.connect('$tuned'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$tuned-wal" "$tuned-shm"
