#!/usr/bin/env bash
# For the next session (any GPU): session 21's host-aware vendor verdicts, measured. ResNet-50
# b128's 21 layer shapes tuned in their backward directions (dgrad and wgrad, 10 trials) into a fresh OUT/rn50.sqlite, so
# that every vendor record holds both host times (torch's call and our winner's); the verdicts
# printed with and without the host times; then ResNet-50 b128 training steps from that database in
# alternating processes: host-aware verdicts (the default), GPU-time verdicts
# (AUTOCUTLASS_VENDOR_HOST=0), and verdicts off. At most 8 files come back: keep it so.
#   bash benchmarks/device/s22_a.sh OUT    (about 9 minutes; 6 files come back)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
db=$out/rn50.sqlite
timeout 300 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv-resnet50.json --only '*/dgrad' --only '*/wgrad' \
    --trials 10 --timeout 8 \
    --db "$db" --json "$out/tune.json" >"$out/log.txt" 2>&1
stamp "tune: rc $? $(grep -v '^\[I ' "$out/log.txt" | tail -1 | cut -c1-160)"
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
python - "$db" >"$out/verdicts.txt" 2>&1 <<'PY'
import sys
from autocutlass.db import TuningStore
from autocutlass.vendor import VENDOR_FAMILY, host_times, vendor_faster
st = TuningStore(sys.argv[1], read_only=True)
every = st.bests(vendor=True)
ours = {(r.problem.key()): r for r in every if r.family != VENDOR_FAMILY}
flips = 0
for t in (r for r in every if r.family == VENDOR_FAMILY):
    m = ours.get(t.problem.key())
    if m is None:
        continue
    h = host_times(t.config)
    gpu, both = vendor_faster(m.median_ms, t.median_ms), vendor_faster(m.median_ms, t.median_ms, h)
    flips += gpu != both
    hs = f"host ours {h[0]*1e3:6.1f} us torch {h[1]*1e3:6.1f} us" if h else "host -"
    print(f"{t.problem.describe()[:60]:60s} ours {m.median_ms*1e3:8.1f} us torch {t.median_ms*1e3:8.1f} us {hs} "
          f"verdict gpu:{'torch' if gpu else 'ours '} gpu+host:{'torch' if both else 'ours '}")
print(f"{flips} verdict(s) change with the host times")
PY
stamp "verdicts: $(tail -1 "$out/verdicts.txt")"
for i in 1 2; do
  for v in "" "AUTOCUTLASS_VENDOR_HOST=0" "AUTOCUTLASS_VENDOR_VERDICTS=0"; do
    env $v AUTOCUTLASS_DB="$db" timeout 60 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 \
      2>>"$out/log.txt" | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'env': '$v' or 'default', 'run': $i, 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'stats': r['stats_after']}))" >>"$out/train.jsonl"
    stamp "resnet50 ${v:-default} run $i: $(tail -1 "$out/train.jsonl" | cut -c1-140)"
  done
done
# session 21's timing changes (host time per call, the head start sized from it) and the verdicts' records
timeout 100 python -m pytest -q -m gpu -p no:cacheprovider tests/test_search_gpu.py >"$out/tests.txt" 2>&1
stamp "search GPU tests: rc $? $(tail -1 "$out/tests.txt" | cut -c1-160)"
