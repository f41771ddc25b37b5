#!/usr/bin/env bash
# Session 28, call 4 (an H100): the shipped H100 file with the stem's re-tuned records (call 3), as a user gets it
# (policy cached): the conv suite's fprop and wgrad against cuDNN, ResNet-50 b128 inference (unfused and with
# fuse_conv_bn), and a ResNet-50 b128 training step with the stem on our kernels and on cuDNN. One archive back.
#   bash benchmarks/device/s28_d.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_DB=$out/user.sqlite
for d in fprop wgrad; do
  timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only "*/$d" --policy cached \
    --no-first-call --rounds 5 --out "$k/bench-$d" >"$k/bench-$d.txt" 2>>"$k/log.txt"
  stamp "bench $d: rc $? $(grep geomean "$k/bench-$d.txt" | cut -c1-150)"
done
timeout 150 python benchmarks/probes/resnet50_e2e.py --fuse-bn --json "$k/rn50-infer.json" >"$k/rn50-infer.txt" 2>>"$k/log.txt"
stamp "resnet50 inference: rc $?"
for stem in ours torch; do
  timeout 100 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 --stem $stem 2>>"$k/log.txt" \
    | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['resnet50']; print(json.dumps({'stem': '$stem', 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'convs': r['convs_swapped'], 'err': r['grad_rel_err_max'], 'stats': r['stats_after']}))" >>"$k/train.jsonl"
  stamp "resnet50 train, stem $stem: $(tail -1 "$k/train.jsonl" | cut -c1-160)"
done
(cd "$out" && tar czf s28d.tar.gz keep/)
grep -E "geomean|rn50-stem" "$k"/bench-*.txt | cut -c1-230
tail -6 "$k/rn50-infer.txt"
