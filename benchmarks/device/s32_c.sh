#!/usr/bin/env bash
# Session 32, call c (H100, the shipped H100 file rekeyed and with call b's records): the GPU tests of the
# cudagraph-pool fix (ops.launch.on_default_stream: the dgrad's filter copy and split-K scratch are kept only
# on the default stream), the split-K scratch and stream tests; then the UNet-style stack's training step under
# torch.compile(mode="reduce-overhead") on both sides (CUDA graphs: neither side's host time shows).
#   bash benchmarks/device/s32_c.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_torch_ops.py \
  "tests/test_gpu_kernels.py::test_split_k_scratch_follows_the_current_stream" \
  "tests/test_gpu_conv.py::test_split_k_is_bitwise_deterministic" >"$k/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
AUTOCUTLASS_POLICY=cached timeout 330 python benchmarks/probes/conv_train_probe.py --models unet --compile reduce-overhead \
  --rounds 7 --steps 5 --json "$k/train-unet-compiled.json" >"$k/train-unet-compiled.txt" 2>&1
stamp "unet compiled: rc $? $(grep -h 'unet:' "$k/train-unet-compiled.txt" | tail -1)"
(cd "$out" && tar czf s32c.tar.gz keep/)
grep -E "passed|failed|Error" "$k/gpu-tests.txt" | tail -5
grep -h "unet:\|allocator" "$k/train-unet-compiled.txt"; tail -5 "$k/train-unet-compiled.txt" | cut -c1-300
