#!/usr/bin/env bash
# Session 29, an H100: the grouped slab sum (slab_groups=4, on the sources of the commit that adds it):
# its three GPU test cases against the float32 reference, then rn50-l1-1x1-up's wgrad with one chain and with 4
# slab groups against cuDNN, timed with the tuner's protocol, same bits twice. One archive.
#   bash benchmarks/device/s29_i.sh OUT    (about 3 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
timeout 150 python -m pytest -q -m gpu tests/test_gpu_conv_backward.py -k "test_wgrad_kernel and (32 or 33 or 34)" \
  -n 3 -p no:cacheprovider >"$k/gpu-tests-slab.txt" 2>&1; stamp "gpu tests: rc $? $(tail -1 "$k/gpu-tests-slab.txt")"
g1='{"tile_m": 64, "tile_n": 64, "tile_k": 128, "split_k": 12, "split_mode": "workspace", "raster": "along_n"}'
g2='{"tile_m": 64, "tile_n": 64, "tile_k": 128, "split_k": 12, "split_mode": "workspace", "raster": "along_n", "slab_groups": 4}'
g3='{"tile_m": 128, "tile_n": 64, "tile_k": 64, "split_k": 64, "split_mode": "workspace"}'
g4='{"tile_m": 128, "tile_n": 64, "tile_k": 64, "split_k": 64, "split_mode": "workspace", "slab_groups": 4}'
timeout 150 python benchmarks/probes/ncu_wgrad_probe.py --timed "$g1" "$g2" "$g3" "$g4" >"$k/timed.txt" 2>>"$k/log.txt"
stamp "probe: rc $?"
(cd "$out" && tar czf s29i.tar.gz keep/)
cat "$k/timed.txt"; grep "same bits\|rel err" "$k/log.txt"
