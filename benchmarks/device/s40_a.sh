#!/usr/bin/env bash
# Session 40, call a: the swapped orientation (swap_ab: the problem's M on the kernel's N side, in
# tile widths of 16) on large GEMMs whose M or N leaves a partial wave, against the H200 file's
# records and torch. cuBLAS's kernels on these shapes (session 39, call c) fit whole waves this way:
# 128x160 on 4608x1152x4096 is 9 x 29 = 261 tiles only when transposed, 128x168 on 1300x4096x4096
# 32 x 8 = 256, 256x152 on 2100x14336x4096 56 x 14 = 784 (6 waves).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
N=benchmarks/shapes-nsplit.json
S=benchmarks/shapes.json
probe() {  # NAME CASES... -- CONFIGS...
  local name=$1; shift
  local args=()
  while [ "$1" != "--" ]; do args+=(--case "$1"); shift; done; shift
  for c in "$@"; do args+=(--config "hopper_gemm:{$c}"); done
  timeout "${TMO:-200}" python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 5 \
    "${args[@]}" --json "$k/probe-$name.json" > "$k/probe-$name.txt" 2>&1
  echo "probe $name rc=$?"
  grep -E "NOT VER|failed|Error|rror:" "$k/probe-$name.txt" | cut -c1-200 | head -5
}
sw='"swap_ab":true'
probe a $N:ns-4608x1152x4096 $N:ns-1300x4096x4096 $N:ns-2100x14336x4096 -- \
  "\"tile_m\":128,\"tile_n\":160,$sw" "\"tile_m\":192,\"tile_n\":224,$sw" '"tile_m":256,"tile_n":176' \
  "\"tile_m\":256,\"tile_n\":176,\"cluster_m\":2,$sw" "\"tile_m\":128,\"tile_n\":176,\"cluster_m\":2,$sw" \
  "\"tile_m\":256,\"tile_n\":160,\"cluster_m\":2,$sw"
[ $SECONDS -lt "${E_BEFORE:-400}" ] && TMO=120 probe e $S:odd $N:ns-2049x6144x4096 -- \
  "\"tile_m\":256,\"tile_n\":192,$sw" "\"tile_m\":192,\"tile_n\":256,$sw" "\"tile_m\":256,\"tile_n\":192,\"cluster_m\":2,$sw" \
  "\"tile_m\":192,\"tile_n\":128,$sw" "\"tile_m\":192,\"tile_n\":128,\"cluster_m\":2,$sw"
python - "$k" <<'P'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/probe-*.json")):
    rows = json.load(open(f))["rows"]
    for case in dict.fromkeys(r["case"] for r in rows):
        rs = sorted((r for r in rows if r["case"] == case and r.get("verified")), key=lambda r: -r["ratio"])
        print(case, " | ".join(f"{r['short'][:26]} x{r['ratio']:.3f}" + (" (rec)" if r["label"].startswith("record") else "") for r in rs[:6]))
P
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar czf s40a.tar.gz keep/ && rm -rf keep)
# what is left of the call's time: call b's tune of the residue list (benchmarks/device/s40_b.sh), no bench
left=$((${TARGET:-420} - SECONDS))
if [ "${WITH_B:-0}" = 1 ] && [ $left -gt 120 ]; then TUNE_TMO=$((left - 30)) BENCH=0 bash benchmarks/device/s40_b.sh; fi
