#!/usr/bin/env bash
# Session 33, call h (H100): the search's GPU tests with disturbed search timings taken again
# (search.timing.steady): tests/test_search_gpu.py (time_callable, verification, a contained fault, the finals in
# the real benchmark child, one small problem tuned end to end); then the few-tile file's ResNet-50 batch-8 layers
# tuned (12 trials each) into a fresh database, and the spread of every stored trial (p80 / p20).
#   bash benchmarks/device/s33_h.sh OUT    (about 2 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_search_gpu.py >"$k/gpu-tests-search.txt" 2>&1
echo "gpu tests search: rc $? $(tail -1 "$k/gpu-tests-search.txt")"
db=$k/tuned.sqlite
for name in rn50-l4-3x3-b8 rn50-l3-3x3-b8; do
  timeout 50 python -m autocutlass.cli tune --shapes benchmarks/shapes-conv-fewtiles.json --only "$name/fprop" --trials 12 \
    --family hopper_conv --db "$db" >>"$k/tune.txt" 2>&1
  echo "tune $name: rc $?"
done
python - "$db" <<'PY' | tee "$k/spreads.txt"
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "select median_ms, p20_ms, p80_ms, config from trials where state = 'ok' order by p80_ms / p20_ms desc").fetchall()
print(f"{len(rows)} ok trials; p80/p20 largest first:")
for m, p20, p80, cfg in rows[:5]:
    print(f"  {p80 / p20:5.2f}  median {m * 1e3:7.2f} us  {cfg[:110]}")
PY
grep -v "^case\|^tuned on" "$k/tune.txt" | cut -c1-160
