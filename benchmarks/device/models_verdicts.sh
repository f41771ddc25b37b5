#!/usr/bin/env bash
# ResNet-50 and a 2-layer Llama-3-8B on a 2-GPU host, tuned afresh so that every record has its
# vendor verdict (autocutlass/vendor.py), in two steps (each within one device call):
#   bash benchmarks/device/models_verdicts.sh tune    WORK OUT   # GPU tests; pass 1 (misses); tune --pending
#   bash benchmarks/device/models_verdicts.sh measure WORK OUT   # pass 2 (+ conv bench from the records)
# WORK keeps the user database between the steps (/tmp/... on a warm machine).
set -u
step=${1:?tune|measure}; work=${2:?WORK}; out=${3:?OUT}
mkdir -p "$work" "$out"
export AUTOCUTLASS_DB="$work/user.sqlite" AUTOCUTLASS_POLICY=cached
stamp() { echo "[$(date +%T)] $*" >&2; }
if [ "$step" = tune ]; then
    (   # GPU 0: the GPU tests of last session's unverified work, then ResNet-50's misses
        export CUDA_VISIBLE_DEVICES=0
        AUTOCUTLASS_DSL_FREE_LOAD=1 timeout 150 python -m pytest -q -m gpu tests/test_cold_start.py -x >"$out/gpu-tests-cold-start.txt" 2>&1
        AUTOCUTLASS_CONV_DGRAD=1 AUTOCUTLASS_CONV_WGRAD=1 timeout 150 python -m pytest -q -m gpu tests/test_gpu_conv_backward.py -k "training_step or split_reductions" >"$out/gpu-tests-conv-backward.txt" 2>&1
        stamp "tests done"; tail -2 "$out"/gpu-tests-*.txt >&2
        AUTOCUTLASS_SHIPPED_DBS=off timeout 150 python benchmarks/probes/resnet50_e2e.py --json "$out/rn50-pass1.json" --rounds 2 --iters 3 >"$out/rn50-pass1.log" 2>&1
        stamp "rn50 pass 1 done"
    ) &
    (   # GPU 1: Llama's misses
        export CUDA_VISIBLE_DEVICES=1
        AUTOCUTLASS_SHIPPED_DBS=off timeout 200 python benchmarks/probes/llama_train_compile.py --json "$out/llama-pass1.json" --rounds 1 --replays 2 >"$out/llama-pass1.log" 2>&1
        stamp "llama pass 1 done"
    ) &
    wait
    stamp "tuning the misses on both GPUs"
    python -m autocutlass.cli tune --pending --enqueue --trials 12 >"$out/tune.log" 2>&1
    timeout 300 python -m autocutlass.cli tune --worker --heartbeat 5 >>"$out/tune.log" 2>&1
    grep -E "tuned in" "$out/tune.log" | tail -60 >&2
    cp "$AUTOCUTLASS_DB" "$out/user.sqlite"
    stamp "tune step done"
else
    (
        export CUDA_VISIBLE_DEVICES=1
        timeout 280 python benchmarks/probes/llama_train_compile.py --json "$out/llama-pass2.json" >"$out/llama-pass2.log" 2>&1
        stamp "llama pass 2 done"; tail -12 "$out/llama-pass2.log" >&2
    ) &
    (
        export CUDA_VISIBLE_DEVICES=0
        timeout 200 python benchmarks/probes/resnet50_e2e.py --json "$out/rn50-pass2.json" --first-call >"$out/rn50-pass2.log" 2>&1
        stamp "rn50 pass 2 done"; tail -6 "$out/rn50-pass2.log" >&2
        timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-conv.json --only '*/fprop' --no-first-call \
            --out "$out/bench-conv" >"$out/bench-conv.log" 2>&1
        stamp "conv bench done"; tail -8 "$out/bench-conv.log" >&2
    ) &
    wait
    cp "$AUTOCUTLASS_DB" "$out/user-after.sqlite"
    stamp "measure step done"
fi
