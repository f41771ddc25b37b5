#!/usr/bin/env bash
# One 2-GPU device call: GPU 0 measures the cold start (DSL-free load off and on) and the grouped
# suite (hopper_grouped's default configs, untuned); GPU 1 profiles a Llama training step, then
# benches the GEMM suite from the shipped database with and without vendor verdicts, then a
# ResNet-50 training step with the dgrad and wgrad kernels on (untuned problems: default configs).
#   bash benchmarks/device/fast_first_and_grouped.sh OUT
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
export AUTOCUTLASS_POLICY=cached AUTOCUTLASS_DB=$(mktemp -d)/user.sqlite
(
    export CUDA_VISIBLE_DEVICES=0
    AUTOCUTLASS_DSL_FREE_LOAD=0 timeout 120 python benchmarks/probes/cold_start.py --json "$out/cold-start-dsl.json" --cases square,decode --repeats 3 >"$out/cold-start-dsl.log" 2>&1
    AUTOCUTLASS_DSL_FREE_LOAD=1 timeout 120 python benchmarks/probes/cold_start.py --json "$out/cold-start-free.json" --cases square,decode --repeats 3 >"$out/cold-start-free.log" 2>&1
    stamp "cold start done"; tail -4 "$out/cold-start-dsl.log" "$out/cold-start-free.log" >&2
    AUTOCUTLASS_GROUPED_KERNELS=1 timeout 200 python -m autocutlass.cli bench --shapes benchmarks/shapes-grouped.json --policy heuristic \
        --no-first-call --out "$out/bench-grouped" >"$out/bench-grouped.log" 2>&1
    stamp "grouped bench done"; tail -3 "$out/bench-grouped.log" >&2
) &
(
    export CUDA_VISIBLE_DEVICES=1
    timeout 120 python benchmarks/probes/llama_train_profile.py --json "$out/llama-train-profile.json" >"$out/llama-train-profile.log" 2>&1
    stamp "profile done"; grep "^==" "$out/llama-train-profile.log" >&2
    timeout 100 python -m autocutlass.cli bench --shapes benchmarks/shapes.json --no-first-call --out "$out/bench-gemm" >"$out/bench-gemm.log" 2>&1
    AUTOCUTLASS_VENDOR_VERDICTS=0 timeout 100 python -m autocutlass.cli bench --shapes benchmarks/shapes.json --no-first-call --out "$out/bench-gemm-ours-only" >"$out/bench-gemm-ours-only.log" 2>&1
    stamp "gemm bench done"; tail -2 "$out/bench-gemm.log" "$out/bench-gemm-ours-only.log" >&2
    AUTOCUTLASS_CONV_DGRAD=1 AUTOCUTLASS_CONV_WGRAD=1 timeout 150 python benchmarks/probes/conv_train_probe.py --models resnet50 --rounds 3 --steps 3 \
        --json "$out/rn50-train.json" >"$out/rn50-train.log" 2>&1
    stamp "rn50 train done"; tail -5 "$out/rn50-train.log" >&2
) &
wait
stamp "all done"
