#!/usr/bin/env bash
# Session 30, second call: with the search space's fix (fields a config dict leaves out are an axis value, so
# serial and workspace splits are both drawn and the seeds and priors stay as they are), the conv suite's two
# few-tile layers tuned again (16 trials), and the few-tile shapes of benchmarks/shapes-conv-fewtiles.json
# (Stable Diffusion 3x3 layers at batch 1-2, ResNet-50 stage 3-4 at batch 8) tuned into a fresh database (12
# trials each, hopper_conv); then, as a user gets that database (policy cached), the few-tile file against
# cuDNN, and the suite's fprop with the tuned records merged into the shipped file.
#   bash benchmarks/device/s30_b.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
db=$k/tuned.sqlite
tune() {  # shapes trials case...
  local shapes=$1 trials=$2; shift 2
  for name in "$@"; do
    timeout 80 python -m autocutlass.cli tune --shapes "$shapes" --only "$name" --trials "$trials" \
      --family hopper_conv --db "$db" --json "$k/tune-${name//[\/@]/_}.json" >>"$k/tune.txt" 2>>"$k/log.txt"
    stamp "tune $name x$trials: rc $?"
  done
}
tune benchmarks/shapes-conv.json 16 rn50-l4-3x3/fprop rn50-l3-3x3/fprop
few=benchmarks/shapes-conv-fewtiles.json
tune $few 12 $(python -c "import json; print(' '.join(c['name'] + '/fprop' for c in json.load(open('$few'))['cases']))")
python -c "import sqlite3; c = sqlite3.connect('$db'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()"
rm -f "$db-wal" "$db-shm"
case "$gpu" in *H200*) ship=tuning_dbs/NVIDIA-H200.sqlite ;; *) ship=tuning_dbs/NVIDIA-H100-80GB-HBM3.sqlite ;; esac
python -m autocutlass.cli db merge "$ship" "$db" -o "$out/merged.sqlite" >"$k/merge.txt" 2>&1
stamp "merge: rc $? $(tail -1 "$k/merge.txt")"
cp "$out/merged.sqlite" "$ship" && rm -f "$out/merged.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite
for s in fewtiles suite; do
  f=$few; [ $s = suite ] && f=benchmarks/shapes-conv.json
  timeout 110 python -m autocutlass.cli bench --shapes $f --only "*/fprop" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$s" >"$k/bench-$s.txt" 2>>"$k/log.txt"
  stamp "bench $s: rc $? $(grep geomean "$k/bench-$s.txt" | cut -c1-150)"
done
python - "$db" >"$k/modes.txt" <<'PY'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute("select p.dims, t.config, t.median_ms from trials t join problems p on p.id = t.problem_id "
                 "where t.state = 'ok'").fetchall()
best = {}
for dims, cfg, ms in rows:
    d = json.loads(cfg)
    mode = "unsplit" if d.get("split_k", 1) == 1 else d.get("split_mode", "serial")
    key = (dims, mode)
    if key not in best or ms < best[key][0]:
        best[key] = (ms, cfg)
for (dims, mode), (ms, cfg) in sorted(best.items()):
    print(f"{dims} {mode:9s} {ms * 1000:8.1f} us")
PY
(cd "$out" && tar czf s30b.tar.gz keep/ && rm -rf user.sqlite*)
grep -v "^case" "$k/tune.txt" | grep -v "^tuned on" | cut -c1-200
cat "$k/modes.txt"
grep -E "geomean" "$k"/bench-*.txt | cut -c1-200
