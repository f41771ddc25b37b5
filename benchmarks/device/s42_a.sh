#!/usr/bin/env bash
# Session 42, call a: cuDNN's default mode measured as a user meets it. PyTorch caches cuDNN's plans per
# thread, keyed without cudnn.benchmark; the bench timed the default mode on the benchmark side's thread, so
# it read benchmark mode. The probe times a few layers four ways (fresh processes, same thread, own thread);
# the conv suite's three directions benched (policy cached, the shipped file), each cuDNN mode on a thread
# of its own; torch.matmul's time as the tuner and the bench take it (gemm_baseline_probe). Worst case
# about 520 s.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
timeout 100 python benchmarks/probes/cudnn_plan_cache.py --json "$k/plan-cache.json" >"$k/plan-cache.txt" 2>&1
echo "probe: rc $?"
C=benchmarks/shapes-conv.json
export AUTOCUTLASS_DB=$OUT/user.sqlite
bench() {
  timeout $2 python -m autocutlass.cli bench --shapes $C --only "*/$1" --policy cached \
    --no-first-call --rounds $3 --out "$k/bench-$1" >"$k/bench-$1.txt" 2>>"$k/log.txt"
  echo "bench $1: rc $? $(grep geomean "$k/bench-$1.txt" | cut -c1-230)"
  rm -f "$OUT"/user.sqlite*
}
bench dgrad 130 5
bench wgrad 130 5
timeout 70 python benchmarks/probes/gemm_baseline_probe.py --json "$k/gemm-baseline.json" >"$k/gemm-baseline.txt" 2>&1
echo "gemm probe: rc $?"
bench fprop 90 3
tail -9 "$k/plan-cache.txt"
cat "$k/gemm-baseline.txt" | tail -5
for dir in dgrad wgrad fprop; do grep -v "^hit-path" "$k/bench-$dir.txt" | cut -c1-175; done
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s42a.tar.gz keep/ && rm -rf keep)
