#!/usr/bin/env bash
# Ready for session 43 (either GPU): the conv suite's three directions as a user gets the shipped file (policy
# cached), each cuDNN mode on a thread of its own (session 42's fix: the H200's default-mode column has never
# been measured apart from benchmark mode; on an H100 the stem's new records were never benched over the
# suite), then the cuDNN plan-cache probe. Worst case about 480 s.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
C=benchmarks/shapes-conv.json
export AUTOCUTLASS_DB=$OUT/user.sqlite
for dir in wgrad fprop dgrad; do
  timeout 130 python -m autocutlass.cli bench --shapes $C --only "*/$dir" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$dir" >"$k/bench-$dir.txt" 2>>"$k/log.txt"
  echo "bench $dir: rc $? $(grep geomean "$k/bench-$dir.txt" | cut -c1-230)"
  rm -f "$OUT"/user.sqlite*
done
timeout 90 python benchmarks/probes/cudnn_plan_cache.py --json "$k/plan-cache.json" >"$k/plan-cache.txt" 2>&1
echo "probe: rc $?"
tail -9 "$k/plan-cache.txt"
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s43a.tar.gz keep/ && rm -rf keep)
