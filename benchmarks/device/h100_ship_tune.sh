#!/usr/bin/env bash
# Session 10: tune the public GEMM suite and its fp8 and tf32 companions on this GPU (an H100) into
# OUT/tune.sqlite, for the shipped H100 database (tuning_dbs/, `autocutlass tune --export-shipped`
# is run afterwards, off the GPU machine). The H200's shipped records serve as sibling priors (the
# tuner's first candidates). A per-problem wall-clock cap keeps the call inside the device tool's
# 600 s; the database keeps every finished problem if the call is cut off (the resume skips them).
#   bash benchmarks/device/h100_ship_tune.sh OUT [TRIALS] [SECONDS_PER_PROBLEM]
set -u
out=${1:?OUT}; trials=${2:-64}; per=${3:-18}; mkdir -p "$out"
stamp() { echo "[$(date +%T)] $*" >&2; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader >&2
for f in shapes shapes-fp8 shapes-tf32; do
    python -m autocutlass.cli tune --shapes benchmarks/$f.json --trials "$trials" --timeout "$per" \
        --db "$out/tune.sqlite" --json "$out/tune-$f.json" >"$out/tune-$f.log" 2>&1
    stamp "$f: rc $? $(tail -1 "$out/tune-$f.log" | cut -c1-200)"
done
python - "$out" <<'PY' >&2
import json, sys, glob, math
for p in sorted(glob.glob(sys.argv[1] + "/tune-*.json")):
    rows = json.load(open(p))
    v = [r["vs_torch"] for r in rows if r.get("vs_torch")]
    g = math.exp(sum(map(math.log, v)) / len(v)) if v else 0
    print(f"{p.split('/')[-1]}: {len(rows)} problems, {sum(r['wall_s'] for r in rows):.0f} s, geomean vs torch (finals) x{g:.3f}")
    for r in rows:
        print(f"  {r['name']:28s} {r.get('config_label','')[:34]:34s} trials {r['trials']:3d} x{(r.get('vs_torch') or 0):.3f} {r['wall_s']:.1f} s")
PY
