#!/usr/bin/env bash
# Session 18 on the H200, after the H100 ran s18_a.sh: (1) the GPU tests that failed under the
# guards before Pristine.settle (swiglu, gated, dgrad after an in-place weight update) and the
# grouped family's, then this GPU's grouped suite retuned with routing-aware timing into
# /tmp/s18/grouped.sqlite (copied to OUT); (2) the suite benched from it (5 rounds) and
# transformers' Qwen3-MoE block with our grouped kernels on, served from it.
#   bash benchmarks/device/s18_b.sh OUT 1    # tests + tune (about 8 minutes)
#   bash benchmarks/device/s18_b.sh OUT 2    # bench + HF MoE block (about 4 minutes)
set -u
out=${1:?OUT}; part=${2:?PART}; mkdir -p "$out" /tmp/s18
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
export AUTOCUTLASS_GROUPED_KERNELS=1
db=/tmp/s18/grouped.sqlite
if [ "$part" = 1 ]; then
    timeout 200 python -m pytest -q -m gpu tests/test_gpu_swiglu.py tests/test_gpu_gated.py tests/test_gpu_grouped.py \
        "tests/test_gpu_conv_backward.py::test_dgrad_follows_an_in_place_weight_update" >"$out/gpu-tests.txt" 2>&1
    stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt" | cut -c1-200)"
    grep -E "^FAILED|^ERROR" "$out/gpu-tests.txt" | cut -c1-200 | head -20 >&2
    timeout 340 python -m autocutlass.cli tune --shapes benchmarks/shapes-grouped.json --trials 24 --timeout 12 \
        --db "$db" --json "$out/grouped-tune.json" >"$out/grouped-tune.log" 2>&1
    stamp "tune: rc $? $(grep -v '^\[I ' "$out/grouped-tune.log" | grep -v 'trials/s' | tail -26 | cut -c1-170)"
    python -c "import sqlite3; sqlite3.connect('$db').execute('PRAGMA wal_checkpoint(TRUNCATE)')"
    cp "$db" "$out/grouped.sqlite"
else
    [ -f "$db" ] || cp s18-h200-grouped.sqlite "$db"
    AUTOCUTLASS_DB=$db timeout 150 python -m autocutlass.cli bench --shapes benchmarks/shapes-grouped.json \
        --policy cached --no-first-call --rounds 5 --out "$out/bench-grouped" >"$out/bench-grouped.log" 2>&1
    stamp "bench: rc $? $(grep -v '^\[' "$out/bench-grouped.log" | tail -27 | cut -c1-170)"
    for tok in 512 2048; do  # 4096 and 16384 routed rows: the suite's qwen3moe T=4096 and T=16384 buckets
        AUTOCUTLASS_DB=$db timeout 60 python benchmarks/probes/hf_moe_probe.py --tokens $tok \
            --json "$out/hf-moe-k1-t$tok.json" >"$out/hf-moe-k1-t$tok.txt" 2>&1
        stamp "hf moe $tok tokens (grouped kernels on, this tune's records): rc $? $(tail -1 "$out/hf-moe-k1-t$tok.txt" | cut -c1-250)"
    done
fi
