#!/usr/bin/env bash
# Session 31, call a: where a large compute-bound tile's time goes (benchmarks/probes/epilogue_probe.py: per-tile part
# and per-K slope of six GEMM / conv configs, cooperative and ping-pong, beside torch.matmul / cuDNN; the conv
# suite's large 3x3 layers that still trail cuDNN), then the GPU tests owed by session 30's review mend
# (SplitKWorkspace.slabs, used by the GEMM, conv-forward and wgrad runners).
#   bash benchmarks/device/s31_a.sh OUT    (about 7 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out/keep"
k=$out/keep
stamp() { echo "[$(date +%T)] $*" >&2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" >&2
timeout 260 python benchmarks/probes/epilogue_probe.py --cache "$out/cache" --json "$k/epilogue-probe.json" \
  >"$k/epilogue-probe.txt" 2>&1
stamp "epilogue probe: rc $?"
timeout 110 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv.py -k "sk or determin" \
  >"$k/gpu-tests-conv.txt" 2>&1
stamp "gpu tests conv split: rc $? $(tail -1 "$k/gpu-tests-conv.txt")"
timeout 110 python -m pytest -q -p no:cacheprovider tests/test_gpu_conv_backward.py \
  -k "wgrad_kernel or same_bits or pointwise_backward" >"$k/gpu-tests-wgrad.txt" 2>&1
stamp "gpu tests wgrad: rc $? $(tail -1 "$k/gpu-tests-wgrad.txt")"
timeout 80 python -m pytest -q -p no:cacheprovider tests/test_gpu_kernels.py tests/test_gpu_reduce.py -k "workspace" \
  >"$k/gpu-tests-gemm-workspace.txt" 2>&1
stamp "gpu tests gemm workspace: rc $? $(tail -1 "$k/gpu-tests-gemm-workspace.txt")"
(cd "$out" && tar czf s31a.tar.gz keep/ && rm -rf cache)
tail -40 "$k/epilogue-probe.txt" | cut -c1-200
