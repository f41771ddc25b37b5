#!/usr/bin/env bash
# Session 27, call 4 (an H100): the shipped H100 file with the stem's records (s27_b.sh's tune merged in),
# served under policy cached (empty user database): the conv suite's fprop and wgrad, ResNet-50 b128
# inference (unfused and fuse_conv_bn) and one training step probe each with the stem ours and on cuDNN.
#   bash benchmarks/device/s27_c.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_DB=$out/user.sqlite
for d in fprop wgrad; do
  timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/$d" --policy cached \
    --no-first-call --rounds 5 --out "$out/bench-$d" >"$out/bench-$d.txt" 2>>"$out/log.txt"
  stamp "bench $d: rc $? $(grep geomean "$out/bench-$d.txt" | cut -c1-150)"
done
timeout 150 python benchmarks/probes/resnet50_e2e.py --fuse-bn --json "$out/rn50-infer.json" >"$out/rn50-infer.txt" 2>>"$out/log.txt"
stamp "resnet50 inference: rc $?"
for stem in ours torch; do
  timeout 100 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 --stem $stem 2>>"$out/log.txt" \
    | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'stem': '$stem', 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'convs': r['convs_swapped'], 'err': r['grad_rel_err_max'], 'stats': r['stats_after']}))" >>"$out/train.jsonl"
  stamp "resnet50 train, stem $stem: $(tail -1 "$out/train.jsonl" | cut -c1-160)"
done
(cd "$out" && tar czf benches.tar.gz bench-*/ && rm -rf bench-*/ user.sqlite*)
grep -E "geomean|rn50-stem" "$out"/bench-*.txt | cut -c1-230
tail -15 "$out/rn50-infer.txt"
