#!/usr/bin/env bash
# Session 31, call b: an NCHW input of a channels_last conv (a GroupNorm's output) made channels_last and served by
# our kernels (ops.conv.frontend.channels_last_input). GPU tests of the conv backward's module and functional paths,
# then the UNet-style training stack (Stable Diffusion resnet blocks, b8; 13 of its 18 convs take a GroupNorm's NCHW
# output) as a user gets the shipped file (policy cached, misses recorded), the misses tuned (tune --pending), and the
# stack again. One archive.
#   bash benchmarks/device/s31_b.sh OUT [TRIALS]    (about 9 minutes)
set -u
out=${1:?OUT}; trials=${2:-8}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_DB=$out/user.sqlite
timeout 110 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv_backward.py -k "nchw or sites or training_step" \
  >"$k/gpu-tests-nchw.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$k/gpu-tests-nchw.txt")"
train() {  # tag rounds
  timeout 110 python benchmarks/probes/conv_train_probe.py --models unet --rounds "$2" --json "$k/train-$1.json" \
    2>>"$k/log.txt" | tail -1 >/dev/null
  python -c "import json; d=json.load(open('$k/train-$1.json')); r=d['models']['unet']; print(json.dumps({'tag': '$1', 'ms': r['ms_per_step'], 'x': r['speedup_vs_torch'], 'rounds': r['rounds_ms'], 'vs32': r['grad_rel_err_vs_fp32'], 'stats': r['stats_after']}))" >>"$k/train.jsonl" 2>>"$k/log.txt"
  stamp "unet train $1: $(tail -1 "$k/train.jsonl" | cut -c1-220)"
}
train pass1 3
timeout 230 python -m autocutlass.cli tune --pending --trials "$trials" --json "$k/tune-pending.json" >"$k/tune-pending.txt" 2>>"$k/log.txt"
stamp "tune pending: rc $? $(grep -c . "$k/tune-pending.txt") lines"
train pass2 7
cp "$AUTOCUTLASS_DB" "$k/user.sqlite" 2>/dev/null
(cd "$out" && tar czf s31b.tar.gz keep/ && rm -rf user.sqlite*)
tail -25 "$k/tune-pending.txt" | cut -c1-200
