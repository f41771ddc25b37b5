#!/usr/bin/env bash
# Session 17: the grouped family's GPU tests (clusters 2x1 and 1x2, TMA stores of whole tiles), the
# cluster probe (one Mixtral expert's dense GEMM with an A-multicast 1x2 cluster; the grouped
# kernel's clusters at T 16384 and 4096), then the grouped suite tuned into OUT/grouped.sqlite.
#   bash benchmarks/device/s17_c.sh OUT [TRIALS]
set -u
out=${1:?OUT}; trials=${2:-24}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader >&2
timeout 200 python -m pytest -q -m gpu tests/test_gpu_grouped.py >"$out/gpu-tests-grouped.txt" 2>&1
stamp "grouped gpu tests: rc $? $(tail -1 "$out/gpu-tests-grouped.txt" | cut -c1-200)"
grep -E "^FAILED|^E  " "$out/gpu-tests-grouped.txt" | head -8 >&2
timeout 110 python benchmarks/probes/grouped_cluster_probe.py --no-dense --json "$out/grouped-cluster-probe.json" \
    >"$out/grouped-cluster-probe.txt" 2>&1
stamp "cluster probe: rc $?"
grep -E "TF/s|Error|infeasible" "$out/grouped-cluster-probe.txt" >&2
export AUTOCUTLASS_GROUPED_KERNELS=1
timeout 270 python -m autocutlass.cli tune --shapes benchmarks/shapes-grouped.json --trials "$trials" --timeout 10 \
    --db "$out/grouped.sqlite" --json "$out/grouped-tune.json" >"$out/grouped-tune.log" 2>&1
stamp "tune: rc $? $(grep -v '^\[I ' "$out/grouped-tune.log" | grep -v 'trials/s' | tail -26 | cut -c1-160)"
python - "$out/grouped.sqlite" <<'PY' || true
import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.close()
PY
