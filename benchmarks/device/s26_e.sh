#!/usr/bin/env bash
# Session 26, call 6 (an H100): the shipped H100 file after this session's merges, served under policy
# cached (empty user database, shipped kernels): the conv suite's three directions, the public GEMM
# suite, and a ResNet-50 b128 training step (twice).
#   bash benchmarks/device/s26_e.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_DB=$out/user.sqlite
for d in wgrad fprop dgrad; do
  timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/$d" --policy cached \
    --no-first-call --rounds 5 --out "$out/bench-$d" >"$out/bench-$d.txt" 2>>"$out/log.txt"
  stamp "bench $d: rc $? $(grep geomean "$out/bench-$d.txt" | cut -c1-150)"
done
timeout 170 python -m autocutlass.cli bench --shapes benchmarks/shapes.json --policy cached --out "$out/bench-suite" \
  >"$out/bench-suite.txt" 2>>"$out/log.txt"
stamp "bench suite: rc $? $(grep geomean "$out/bench-suite.txt" | cut -c1-150)"
for i in 1 2; do
  timeout 90 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 2>>"$out/log.txt" \
    | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'run': $i, 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'stats': r['stats_after']}))" >>"$out/train.jsonl"
  stamp "resnet50 train run $i: $(tail -1 "$out/train.jsonl" | cut -c1-120)"
done
(cd "$out" && tar czf benches.tar.gz bench-*/ && rm -rf bench-*/ user.sqlite*)
grep geomean "$out"/bench-*.txt | cut -c1-220
