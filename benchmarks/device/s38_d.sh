#!/usr/bin/env bash
# Session 38, call d (H200): the wide-tile GPU tests again after mending three of call c's test problems (their
# operands were not 16-byte aligned or their B multicast infeasible: the test's set-up, not the kernel), then
# Llama-3-8B, 2 layers, prefill (2048 tokens) and decode from the re-tuned shipped file (gated MLP, packed
# q/k/v, policy background, median of 11 paired rounds) against torch.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_gpu_kernels.py -k "256x192 or 256x160" \
  >"$k/gpu-tests.txt" 2>&1
echo "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
rm -f "$OUT"/user.sqlite*
unset AUTOCUTLASS_DB
timeout 300 python benchmarks/probes/llama_stall_probe.py --policies background --shipped --gated-mlp --qkv \
    --rounds 11 --reps 5 --json "$k/llama.json" >"$k/llama.txt" 2>&1
echo "llama: rc $?"
grep -E "FAIL|Error" "$k"/gpu-tests.txt | head -10
tail -14 "$k/llama.txt" | cut -c1-250
(cd "$OUT" && rm -f user.sqlite* && tar czf s38d.tar.gz keep/ && rm -rf keep)
