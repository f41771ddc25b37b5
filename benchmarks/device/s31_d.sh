#!/usr/bin/env bash
# Session 31, call d: conv_site.NODE_HOST_MS 0.14 (was 0.03, measured in call c) with the NCHW-input copy on: the conv
# backward's NCHW and site GPU tests, the UNet-style stack's training step (call b's records) and ResNet-50 b128's,
# against torch with cudnn.benchmark, as a user gets the shipped H100 file (policy cached).
#   bash benchmarks/device/s31_d.sh OUT    (about 5 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 100 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv_backward.py -k "nchw or sites" \
  >"$k/gpu-tests-nchw.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$k/gpu-tests-nchw.txt")"
cp .s31/unet-user.sqlite "$out/user.sqlite"
export AUTOCUTLASS_DB=$out/user.sqlite AUTOCUTLASS_POLICY=cached
for m in unet resnet50; do
  timeout 170 python benchmarks/probes/conv_train_probe.py --models $m --rounds 7 --stem ours --json "$k/train-$m.json" \
    2>>"$k/train-$m-log.txt" | tail -1 >/dev/null
  python -c "import json; d=json.load(open('$k/train-$m.json')); r=d['models']['$m']; print(json.dumps({'model': '$m', 'node_ms': d['site_node_host_ms'], 'ms': r['ms_per_step'], 'host_ms': r['host_ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'vs32': r['grad_rel_err_vs_fp32'], 'stats': r['stats_after']}))" >>"$k/train.jsonl" 2>>"$k/log.txt"
  stamp "train $m: $(tail -1 "$k/train.jsonl" | cut -c1-260)"
done
(cd "$out" && tar czf s31d.tar.gz keep/ && rm -rf user.sqlite*)
