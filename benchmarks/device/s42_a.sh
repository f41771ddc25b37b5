#!/usr/bin/env bash
# Session 42, call a (H100): cuDNN's default mode measured as a user meets it. PyTorch caches cuDNN's plans
# per thread, keyed without cudnn.benchmark; the bench timed the default mode on the benchmark side's
# thread, so it read benchmark mode. The probe times a few layers four ways (fresh processes, same thread,
# own thread); then the conv suite's three directions benched (policy cached, the shipped file), each cuDNN
# mode on a thread of its own; the bench's GPU test.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
timeout 100 python benchmarks/probes/cudnn_plan_cache.py --json "$k/plan-cache.json" >"$k/plan-cache.txt" 2>&1
echo "probe: rc $?"
timeout 60 python -m pytest -q -p no:cacheprovider tests/test_cli_bench_conv.py >"$k/gpu-tests.txt" 2>&1
echo "bench tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
C=benchmarks/shapes-conv.json
export AUTOCUTLASS_DB=$OUT/user.sqlite
for dir in dgrad wgrad fprop; do
  timeout 140 python -m autocutlass.cli bench --shapes $C --only "*/$dir" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$dir" >"$k/bench-$dir.txt" 2>>"$k/log.txt"
  echo "bench $dir: rc $? $(grep geomean "$k/bench-$dir.txt" | cut -c1-230)"
  rm -f "$OUT"/user.sqlite*
done
cat "$k/plan-cache.txt" | tail -12
for dir in dgrad wgrad fprop; do grep -v "^hit-path" "$k/bench-$dir.txt" | cut -c1-175; done
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s42a.tar.gz keep/ && rm -rf keep)
