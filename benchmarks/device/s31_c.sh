#!/usr/bin/env bash
# Session 31, call c: the UNet-style stack with call b's tuned records (the shipped H100 file plus call b's user
# database of the stack's misses), an NCHW input of a channels_last conv made channels_last (on) or not (off):
# inference (unet_infer_probe.py) and training steps with per-step host (enqueue) time and one profiled step each.
#   bash benchmarks/device/s31_c.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
cp .s31/unet-user.sqlite "$out/user.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite AUTOCUTLASS_POLICY=cached
timeout 120 python benchmarks/probes/unet_infer_probe.py --batch 8 --rounds 7 --json "$k/unet-infer-b8.json" \
  >"$k/unet-infer-b8.txt" 2>>"$k/log.txt"
stamp "infer b8: $(python -c "import json; d=json.load(open('$k/unet-infer-b8.json')); print(d['ms_per_forward'], d['speedup_vs_torch'])")"
for c in on off; do
  timeout 130 python benchmarks/probes/conv_train_probe.py --models unet --rounds 7 --profile 14 --nchw-copy $c \
    --json "$k/train-$c.json" 2>>"$k/train-$c-log.txt" | tail -1 >/dev/null
  python -c "import json; d=json.load(open('$k/train-$c.json')); r=d['models']['unet']; print(json.dumps({'nchw_copy': '$c', 'ms': r['ms_per_step'], 'host_ms': r['host_ms_per_step'], 'x': r['speedup_vs_torch'], 'gpu_total': {s: p[0]['ms'] for s, p in r['profile'].items()}, 'site_torch': r['stats_after']['site_torch'], 'fallbacks': r['stats_after']['fallbacks']}))" >>"$k/train.jsonl" 2>>"$k/log.txt"
  stamp "train $c: $(tail -1 "$k/train.jsonl" | cut -c1-300)"
done
(cd "$out" && tar czf s31c.tar.gz keep/ && rm -rf user.sqlite*)
