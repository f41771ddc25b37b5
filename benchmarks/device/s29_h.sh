#!/usr/bin/env bash
# Session 29, an H100: the UNet-style training step (Stable Diffusion resnet blocks, b8) and ResNet-50 b128's
# against torch with cudnn.benchmark, as a user gets the shipped H100 file (policy cached). One archive.
#   bash benchmarks/device/s29_h.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_DB=$out/user.sqlite
for m in unet resnet50; do
  timeout 170 python benchmarks/probes/conv_train_probe.py --models $m --rounds 7 --stem ours 2>>"$k/log.txt" \
    | python -c "import json,sys; d=json.load(sys.stdin); r=d['models']['$m']; print(json.dumps({'model': '$m', 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'convs': r['convs_swapped'], 'vs32': r['grad_rel_err_vs_fp32'], 'stats': r['stats_after']}))" >>"$k/train.jsonl"
  stamp "$m train: $(tail -1 "$k/train.jsonl" | cut -c1-160)"
done
(cd "$out" && tar czf s29h.tar.gz keep/ && rm -rf user.sqlite*)
