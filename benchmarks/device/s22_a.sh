#!/usr/bin/env bash
# For the next session (any GPU): session 21's host-aware vendor verdicts, measured. The shipped
# database of this GPU copied to OUT/db.sqlite, its ResNet-50 b128 problems (all three directions of
# benchmarks/shapes-conv-resnet50.json) re-timed against torch with `tune --verdicts` (the finals:
# both host times into every vendor record; which verdicts the host times change is printed), then
# ResNet-50 b128 training steps from that database in alternating processes: host-aware verdicts
# (the default), GPU-time verdicts (AUTOCUTLASS_VENDOR_HOST=0), and verdicts off; ResNet-50 b128
# inference (GPU-bound) with and without host times in verdicts; last, the search GPU tests (the timing's host time and head start). At most 8 files come back: 6 here.
#   bash benchmarks/device/s22_a.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$out/db.sqlite
cp "tuning_dbs/$(echo "$gpu" | tr ' ' '-').sqlite" "$db" || { echo "no shipped database for $gpu" >&2; exit 3; }
timeout 300 python -m autocutlass.cli tune --verdicts benchmarks/shapes-conv-resnet50.json --db "$db" \
    --json "$out/verdicts.json" >"$out/verdicts.txt" 2>"$out/log.txt"
stamp "verdicts: rc $? $(tail -1 "$out/verdicts.txt")"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
for i in 1 2; do
  for v in "" "AUTOCUTLASS_VENDOR_HOST=0" "AUTOCUTLASS_VENDOR_VERDICTS=0"; do
    env $v AUTOCUTLASS_DB="$db" timeout 60 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 \
      2>>"$out/log.txt" | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'env': '$v' or 'default', 'run': $i, 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'stats': r['stats_after']}))" >>"$out/train.jsonl"
    stamp "resnet50 ${v:-default} run $i: $(tail -1 "$out/train.jsonl" | cut -c1-140)"
  done
done
for v in "" "AUTOCUTLASS_VENDOR_HOST=0"; do  # GPU-bound inference: what the host-aware verdicts may cost there
  env $v AUTOCUTLASS_DB="$db" timeout 60 python benchmarks/probes/resnet50_e2e.py --rounds 5 2>>"$out/log.txt" \
    | grep "^ResNet-50" | sed "s/^/${v:-default}: /" >>"$out/verdicts.txt"
  stamp "inference ${v:-default}: $(tail -1 "$out/verdicts.txt" | cut -c1-150)"
done
timeout 100 python -m pytest -q -m gpu -p no:cacheprovider tests/test_search_gpu.py >"$out/tests.txt" 2>&1
stamp "search GPU tests: rc $? $(tail -1 "$out/tests.txt" | cut -c1-160)"
