#!/usr/bin/env bash
# Session 21: conv sites whose forward and wgrad torch serves run F.conv2d (one cuDNN backward call)
# instead of our dgrad beside torch's wgrad. A/B in alternating processes ('torch' = the new rule,
# 'split' = before): ResNet-50 b128 and the UNet stack b8 (host-bound) and b32, cached policy, the
# shipped database; ResNet-50 with vendor verdicts off and on; then the GPU tests of the conv sites.
#   bash benchmarks/device/s21_d.sh OUT    (about 6 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
for i in 1 2; do
  for r in torch split; do
    timeout 120 python benchmarks/probes/conv_train_probe.py --models resnet50,unet --rounds 7 --torch-wgrad-layers $r \
      --json "$out/train-$r-$i.json" >/dev/null 2>"$out/train-$r-$i.txt"
    stamp "$r $i: rc $? $(grep -E '^(resnet50|unet):' "$out/train-$r-$i.txt" | cut -c1-60 | tr '\n' ' ')"
  done
done
for r in torch split; do
  timeout 90 python benchmarks/probes/conv_train_probe.py --models unet --unet-batch 32 --rounds 7 --torch-wgrad-layers $r \
    --json "$out/train-unet32-$r.json" >/dev/null 2>"$out/train-unet32-$r.txt"
  stamp "unet b32 $r: rc $? $(grep -E '^unet:' "$out/train-unet32-$r.txt" | cut -c1-60)"
done
for v in 0 1; do  # our kernels on every tuned direction (vendor verdicts off) vs the default, both with the new rule
  AUTOCUTLASS_VENDOR_VERDICTS=$v timeout 90 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 7 \
    --json "$out/train-verdicts$v.json" >/dev/null 2>"$out/train-verdicts$v.txt"
  stamp "resnet50 verdicts=$v: rc $? $(grep -E '^resnet50:' "$out/train-verdicts$v.txt" | cut -c1-60)"
done
timeout 150 python -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_conv_backward.py tests/test_gpu_transpose.py -k "site or nchw or convnet or tf32_gemm" \
  >"$out/gpu-tests-sites.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests-sites.txt" | cut -c1-200)"
grep -E "^FAILED|^ERROR" "$out/gpu-tests-sites.txt" | cut -c1-300 | head >&2
