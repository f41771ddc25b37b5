#!/usr/bin/env bash
# Session 31, call f (an H200): the UNet-style stack's conv problems tuned into the H200 file. One recording training pass
# as a user gets the shipped H200 file (policy cached: misses recorded), tune --pending, then the stack's training step and
# inference (NCHW-input copy on and off) against torch with cudnn.benchmark. One archive with the tuned user database.
#   bash benchmarks/device/s31_f.sh OUT [TRIALS]    (about 8 minutes)
set -u
out=${1:?OUT}; trials=${2:-8}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_DB=$out/user.sqlite AUTOCUTLASS_POLICY=cached
timeout 90 python benchmarks/probes/conv_train_probe.py --models unet --rounds 1 --steps 1 --json "$k/train-record.json" \
  >/dev/null 2>>"$k/log.txt"
stamp "recording pass: rc $?"
timeout 230 python -m autocutlass.cli tune --pending --trials "$trials" --json "$k/tune-pending.json" >"$k/tune-pending.txt" 2>>"$k/log.txt"
stamp "tune pending: rc $?"
cp "$AUTOCUTLASS_DB" "$k/user.sqlite"
timeout 100 python benchmarks/probes/conv_train_probe.py --models unet --rounds 7 --json "$k/train-unet.json" >/dev/null 2>>"$k/log.txt"
python -c "import json; d=json.load(open('$k/train-unet.json')); r=d['models']['unet']; print(json.dumps({'model': 'unet', 'node_ms': d['site_node_host_ms'], 'ms': r['ms_per_step'], 'host_ms': r['host_ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'vs32': r['grad_rel_err_vs_fp32'], 'stats': r['stats_after']}))" >>"$k/train.jsonl" 2>>"$k/log.txt"
stamp "train unet: $(tail -1 "$k/train.jsonl" | cut -c1-260)"
timeout 80 python benchmarks/probes/unet_infer_probe.py --batch 8 --rounds 7 --json "$k/unet-infer-b8.json" >/dev/null 2>>"$k/log.txt"
stamp "infer b8: $(python -c "import json; d=json.load(open('$k/unet-infer-b8.json')); print(d['ms_per_forward'], d['speedup_vs_torch'])")"
(cd "$out" && tar czf s31f.tar.gz keep/ && rm -rf user.sqlite*)
grep -E "^pending|problems" "$k/tune-pending.txt" | cut -c1-180 | tail -32
