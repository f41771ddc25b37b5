#!/usr/bin/env bash
# Session 26, call 11 (an H100), an experiment: multi-wave split counts of the wgrad pixel loop with
# the persistent scheduler's units in split-major order (AUTOCUTLASS_EXP_SPLIT_MAJOR=1: unit l' =
# split * taps + tap, so that a wave runs one split of every tap and the taps that read one pixel
# block run together) against the committed tap-major order (l' = tap * splits + split), each build in
# its own process and kernel cache, beside the shipped config and cuDNN (conv_wgrad_probe.py
# --shipped-only --config ...). The build existed only in that run's working tree (kernel.py's
# _split_range, the workspace slab index and the serial turnstile's split; reverted after).
#   bash benchmarks/device/s26_h.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off
cfgs=(--config '{"tile_m":256,"tile_n":128,"tile_k":64,"split_k":11}'
      --config '{"tile_m":128,"tile_n":256,"tile_k":64,"split_k":11}'
      --config '{"tile_m":128,"tile_n":256,"tile_k":64,"split_k":22,"split_mode":"workspace"}')
layers=vae-512@128,vae-256@512,rn50-l4-3x3-b256,rn50-l3-3x3-b128
for order in 1 0 1; do
  AUTOCUTLASS_EXP_SPLIT_MAJOR=$order timeout 150 python benchmarks/probes/conv_wgrad_probe.py --layers $layers \
    --shipped-only "${cfgs[@]}" --rounds 3 --json "$out/probe-major$order-$SECONDS.json" >"$out/probe-major$order-$SECONDS.txt" 2>>"$out/log.txt"
  stamp "split-major=$order: rc $?"
done
for f in "$out"/probe-major*.txt; do echo "== $f"; grep -E "^(vae|rn50)\S* +(cudnn|shipped|extra)" "$f" | cut -c1-100; done
