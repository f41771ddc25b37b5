#!/usr/bin/env bash
# Session 26, call 1 (an H100): wave-filling split counts for the wgrad family (wave_splits): (1) the
# conv suite's wgrad layers, the shipped database's config beside the family's first five seeds (the
# cost model's picks, now with the split counts that fill the GPU's waves) and cuDNN's benchmark
# mode (benchmarks/probes/conv_wgrad_probe.py); (2) the conv backward GPU tests (two new wgrad cases:
# 7 serial splits, 22 workspace slabs of an uneven pixel loop).
#   bash benchmarks/device/s26_a.sh OUT    (about 8 minutes)
set -u
out=${1:?OUT}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >&2
export AUTOCUTLASS_SHIPPED_KERNELS=off
timeout 280 python benchmarks/probes/conv_wgrad_probe.py --seeds 5 --rounds 3 --json "$out/wgrad-probe.json" \
  >"$out/wgrad-probe.txt" 2>"$out/log.txt"
stamp "wgrad probe: rc $?"
AUTOCUTLASS_CACHE_DIR=$(mktemp -d) timeout 280 python -m pytest -q -x tests/test_gpu_conv_backward.py \
  >"$out/gpu-tests-conv-backward.txt" 2>&1
stamp "gpu tests conv backward: rc $? $(tail -1 "$out/gpu-tests-conv-backward.txt")"
python - "$out/wgrad-probe.json" <<'PY' | tee "$out/table.txt"
import json, sys, statistics
rows = json.load(open(sys.argv[1]))["rows"]
by = {}
for r in rows:
    if not r.get("wrong") and r.get("x_cudnn"):
        by.setdefault(r["layer"], []).append(r)
ship, best = [], []
for layer, rs in by.items():
    s = [r for r in rs if r.get("tag") == "shipped"]
    b = max(rs, key=lambda r: r["x_cudnn"])
    if s:
        ship.append(s[0]["x_cudnn"]); best.append(b["x_cudnn"])
    print(f"{layer:18s} shipped {s[0]['x_cudnn'] if s else float('nan'):6.3f}  best {b['x_cudnn']:6.3f} {b.get('tag','')} {b.get('config','')}")
print(f"geomean shipped x{statistics.geometric_mean(ship):.3f}, best of shipped+seeds x{statistics.geometric_mean(best):.3f} over {len(ship)}")
PY
