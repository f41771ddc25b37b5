#!/usr/bin/env bash
# Session 25, call 2 (an H100): (1) the GPU tests of the GEMM kernels, the split-K reduce (now 4
# columns a thread and launched with PDL), dispatch and the conv backward (the wgrad slab sum in its
# new build); (2) the wgrad slab sum's old build (AUTOCUTLASS_EXP_SLAB=old: 256 threads, 16 bytes of
# dw a thread, no PDL) against the new one, on the shipped database's config of each conv-suite
# wgrad layer against cuDNN (benchmarks/probes/conv_wgrad_probe.py --shipped-only), alternating.
#   bash benchmarks/device/s25_b.sh OUT    (about 9 minutes)
# AUTOCUTLASS_EXP_SLAB existed only in that run's working tree; the committed slab sum is the new build.
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off
AUTOCUTLASS_CACHE_DIR=$(mktemp -d) timeout 330 python -m pytest -q -x tests/test_gpu_kernels.py tests/test_gpu_reduce.py \
  tests/test_gpu_dispatch.py tests/test_gpu_conv_backward.py >"$out/gpu-tests.txt" 2>&1
stamp "gpu tests: rc $? $(tail -1 "$out/gpu-tests.txt")"
for run in a b; do
  for build in old new; do
    AUTOCUTLASS_EXP_SLAB=$build timeout 100 python benchmarks/probes/conv_wgrad_probe.py --shipped-only --rounds 5 \
      --json "$out/wgrad-$build-$run.json" >"$out/wgrad-$build-$run.txt" 2>>"$out/log.txt"
    stamp "wgrad $build $run: rc $?"
  done
done
python - "$out" <<'PY' | tee "$out/table.txt"
import json, sys, pathlib, statistics
out = pathlib.Path(sys.argv[1]); rows = {}
for f in sorted(out.glob("wgrad-*.json")):
    tag = f.stem[len("wgrad-"):]
    for r in json.loads(f.read_text())["rows"]:
        if r.get("tag") == "shipped" and not r.get("wrong"):
            rows.setdefault(r["layer"], {})[tag] = (r["x_cudnn"], r["us"])
tags = sorted({t for v in rows.values() for t in v})
print(f"{'layer':18s} " + " ".join(f"{t:>14s}" for t in tags))
for layer, v in rows.items():
    print(f"{layer:18s} " + " ".join(f"{v[t][0]:6.3f} {v[t][1]:7.1f}" if t in v else " " * 14 for t in tags))
for t in tags:
    vals = [v[t][0] for v in rows.values() if t in v]
    print(f"geomean {t}: x{statistics.geometric_mean(vals):.3f} over {len(vals)}")
PY
(cd "$out" && tar czf wgrad.tar.gz wgrad-*.json wgrad-*.txt && rm -f wgrad-*.json wgrad-*.txt)
