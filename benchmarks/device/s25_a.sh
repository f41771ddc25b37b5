#!/usr/bin/env bash
# Session 25, call 1 (an H100): workspace split-K's reduce kernel, four builds side by side
# (benchmarks/probes/splitk_reduce_probe.py; kernels precompiled into .s25cache/caches.tar.xz, one
# cache per build), then the GEMM and reduce GPU tests with the most changed build (new reduce,
# PDL wait, the GEMM's early trigger).
#   bash benchmarks/device/s25_a.sh OUT    (about 8 minutes)
# The AUTOCUTLASS_EXP_* variables and .s25cache/ existed only in that run's working tree (see
# splitk_reduce_probe.py's docstring); the committed reduce is build v2.
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
tmp=$(mktemp -d); tar xJf .s25cache/caches.tar.xz -C "$tmp"
export AUTOCUTLASS_SHIPPED_KERNELS=off
run_build() {  # name reduce pdl
  AUTOCUTLASS_EXP_REDUCE=$2 AUTOCUTLASS_EXP_PDL=$3 timeout 240 python benchmarks/probes/splitk_reduce_probe.py \
    --cache "$tmp/$1" --json "$out/probe-$1-$4.json" >"$out/probe-$1-$4.txt" 2>>"$out/log.txt"
  stamp "build $1 run $4: rc $?"
}
run_build v0 old 0 a; run_build v3 new 2 a; run_build v1 new 0 a; run_build v2 new 1 a; run_build v0 old 0 b; run_build v3 new 2 b
export AUTOCUTLASS_EXP_REDUCE=new AUTOCUTLASS_EXP_PDL=2 AUTOCUTLASS_CACHE_DIR=$tmp/tests
timeout 300 python -m pytest -q -x tests/test_gpu_kernels.py tests/test_gpu_reduce.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests (build v3): rc $? $(tail -1 "$out/gpu-tests.txt")"
python - "$out" <<'PY' | tee "$out/table.txt"
import json, sys, pathlib, statistics
out = pathlib.Path(sys.argv[1]); rows = {}
for f in sorted(out.glob("probe-*.json")):
    tag = f.stem[len("probe-"):]
    for r in json.loads(f.read_text())["rows"]:
        if r["config"]:
            rows.setdefault((r["case"], r["side"]), {})[tag] = r["ratio_vs_torch"]
tags = sorted({t for v in rows.values() for t in v})
print(f"{'case':22s} {'config':38s} " + " ".join(f"{t:>6s}" for t in tags))
for (case, side), v in rows.items():
    print(f"{case:22s} {side:38s} " + " ".join(f"{v.get(t, float('nan')):6.3f}" for t in tags))
for t in tags:
    vals = [v[t] for v in rows.values() if t in v]
    print(f"geomean {t}: {statistics.geometric_mean(vals):.3f} over {len(vals)}")
PY
(cd "$out" && tar czf probes.tar.gz probe-*.json probe-*.txt && rm -f probe-*.json probe-*.txt)
