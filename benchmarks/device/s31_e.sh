#!/usr/bin/env bash
# Session 31, call e: the final H100 file (the shipped one with call b's 30 tuned UNet-stack problems merged in) as a user
# gets it (policy cached, empty user database), NODE_HOST_MS 0.14, the NCHW-input copy on: ResNet-50 b128's and the
# UNet-style stack b8's training steps, and the stack's inference (copy on and off), against torch with cudnn.benchmark.
#   bash benchmarks/device/s31_e.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_DB=$out/user.sqlite AUTOCUTLASS_POLICY=cached
for m in resnet50 unet; do
  timeout 170 python benchmarks/probes/conv_train_probe.py --models $m --rounds 7 --stem ours --json "$k/train-$m.json" \
    2>>"$k/train-$m-log.txt" | tail -1 >/dev/null
  python -c "import json; d=json.load(open('$k/train-$m.json')); r=d['models']['$m']; print(json.dumps({'model': '$m', 'node_ms': d['site_node_host_ms'], 'ms': r['ms_per_step'], 'host_ms': r['host_ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'vs32': r['grad_rel_err_vs_fp32'], 'stats': r['stats_after']}))" >>"$k/train.jsonl" 2>>"$k/log.txt"
  stamp "train $m: $(tail -1 "$k/train.jsonl" | cut -c1-260)"
done
timeout 100 python benchmarks/probes/unet_infer_probe.py --batch 8 --rounds 7 --json "$k/unet-infer-b8.json" \
  >/dev/null 2>>"$k/log.txt"
stamp "infer b8: $(python -c "import json; d=json.load(open('$k/unet-infer-b8.json')); print(d['ms_per_forward'], d['speedup_vs_torch'])")"
(cd "$out" && tar czf s31e.tar.gz keep/ && rm -rf user.sqlite*)
