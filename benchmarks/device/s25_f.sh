#!/usr/bin/env bash
# Session 25, call 6 (an H100): the shipped H100 database after the re-tune of the records the new
# split-K reduce and wgrad slab sum retired, served under policy cached (empty user database,
# shipped kernels): issue 21's long-K and class shapes, the conv suite's wgrad directions, the public
# GEMM suite, and ResNet-50 b128 training (two processes).
#   bash benchmarks/device/s25_f.sh OUT    (about 9 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_DB=$out/user.sqlite
for f in longk online; do
  timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-$f.json --policy cached --out "$out/bench-$f" \
    >"$out/bench-$f.txt" 2>>"$out/log.txt"
  stamp "bench $f: rc $? $(grep geomean "$out/bench-$f.txt" | cut -c1-150)"
done
timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only '*/wgrad' --policy cached \
  --no-first-call --rounds 3 --out "$out/bench-wgrad" >"$out/bench-wgrad.txt" 2>>"$out/log.txt"
stamp "bench wgrad: rc $? $(grep geomean "$out/bench-wgrad.txt" | cut -c1-150)"
for i in 1 2; do
  timeout 90 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 2>>"$out/log.txt" \
    | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'run': $i, 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'stats': r['stats_after']}))" >>"$out/train.jsonl"
  stamp "resnet50 train run $i: $(tail -1 "$out/train.jsonl" | cut -c1-120)"
done
timeout 170 python -m autocutlass.cli bench --shapes benchmarks/shapes.json --policy cached --out "$out/bench-suite" \
  >"$out/bench-suite.txt" 2>>"$out/log.txt"
stamp "bench suite: rc $? $(grep geomean "$out/bench-suite.txt" | cut -c1-150)"
(cd "$out" && tar czf benches.tar.gz bench-*/ && rm -rf bench-*/ user.sqlite*)
