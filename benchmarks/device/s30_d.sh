#!/usr/bin/env bash
# Session 30, an H200: the search GPU tests with the search space's fix; the two weakest memory-bound wgrad layers
# of the H200 file (rn50-l1-1x1-up, rn50-l3-1x1) tuned again under hopper_conv_wgrad from the priors, now that
# the search draws the grouped slab sum (slab_groups, a field a config dict leaves out at 1); merged on the
# machine into the shipped file; the conv suite's wgrad against cuDNN as a user gets that file.
#   bash benchmarks/device/s30_d.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_search_gpu.py >"$k/gpu-tests-search.txt" 2>&1
stamp "gpu tests search: rc $? $(tail -1 "$k/gpu-tests-search.txt")"
db=$k/tuned.sqlite
for name in rn50-l1-1x1-up/wgrad rn50-l3-1x1/wgrad; do
  timeout 90 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv.json --only "$name" --trials 24 \
    --family hopper_conv_wgrad --db "$db" --json "$k/tune-${name//[\/@]/_}.json" >>"$k/tune.txt" 2>>"$k/log.txt"
  stamp "tune $name: rc $?"
done
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
sqlite3 -separator ' ' "$db" "select json_extract(config, '$.split_k'), ifnull(json_extract(config, '$.slab_groups'), 1), round(min(median_ms) * 1000, 1) from trials where state = 'ok' and json_extract(config, '$.split_mode') = 'workspace' group by problem_id, 1, 2 order by problem_id, 3" >"$k/slab-groups.txt" 2>&1 || python - "$db" >"$k/slab-groups.txt" <<'PY'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for pid, cfg, ms in c.execute("select problem_id, config, median_ms from trials where state = 'ok' order by problem_id"):
    d = json.loads(cfg)
    print(pid, d.get("split_k"), d.get("split_mode"), d.get("slab_groups", 1), round(ms * 1000, 1))
PY
case "$gpu" in *H200*) ship=tuning_dbs/NVIDIA-H200.sqlite ;; *) ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite ;; esac
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 110 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/wgrad" --policy cached \
  --no-first-call --rounds 5 --out "$k/bench-wgrad" >"$k/bench-wgrad.txt" 2>>"$k/log.txt"
stamp "bench wgrad: rc $? $(grep geomean "$k/bench-wgrad.txt" | cut -c1-150)"
(cd "$out" && tar czf s30d.tar.gz keep/ && rm -rf user.sqlite*)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
cat "$k/slab-groups.txt" | head -40
grep -E "1x1|geomean" "$k/bench-wgrad.txt" | cut -c1-200
