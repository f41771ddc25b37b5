#!/usr/bin/env bash
# Session 39, call d (H200): cuBLAS's tile shapes on the six M-residue GEMMs call b/c's tunes still lose
# (call c's profile: 128x160 1x1 on 4608x1152x4096, 256x152 1x2 on 2100x14336x4096, 192x192 coopB 1x2 on
# 1100x8192x4096, 128x168 2x1 on 1300x4096x4096, 192x176 coopB 1x2 on 3100x4096x8192, 192x128 coopB 1x2 on
# 2000x3000x1000) in our nearest configs, against call c's 48-trial records and torch.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
N=benchmarks/shapes-nsplit.json
cases=(--case $N:ns-2000x3000x1000 --case $N:ns-4608x1152x4096 --case $N:ns-2100x14336x4096
       --case $N:ns-1100x8192x4096 --case $N:ns-1300x4096x4096 --case $N:ns-3100x4096x8192)
cfgs=()
for c in '"tile_m":128,"tile_n":160' '"tile_m":128,"tile_n":160,"cluster_n":2' '"tile_m":128,"tile_n":160,"cluster_m":2' \
         '"tile_m":128,"tile_n":176,"cluster_m":2' '"tile_m":128,"tile_n":176,"cluster_n":2' \
         '"tile_m":256,"tile_n":160,"cluster_n":2' '"tile_m":256,"tile_n":144,"cluster_n":2' \
         '"tile_m":192,"tile_n":192' '"tile_m":192,"tile_n":192,"cluster_n":2' '"tile_m":192,"tile_n":160,"cluster_n":2' \
         '"tile_m":192,"tile_n":224,"cluster_n":2'; do
  cfgs+=(--config "hopper_gemm:{$c}")
done
timeout 420 python benchmarks/probes/config_probe.py --db s39c-tuned.sqlite --workers 15 --rounds 5 \
  "${cases[@]}" "${cfgs[@]}" --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "NOT VER|failed|Error" "$k/probe.txt" | cut -c1-200 | head
python - "$k/probe.json" <<'P'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
for case in dict.fromkeys(r["case"] for r in rows):
    rs = sorted((r for r in rows if r["case"] == case and r.get("verified")), key=lambda r: -r["ratio"])
    print(case, " | ".join(f"{r['short'][:22]} x{r['ratio']:.3f}" + (" (rec)" if r["label"].startswith("record") else "") for r in rs[:5]))
P
(cd "$OUT" && tar czf s39d.tar.gz keep/ && rm -rf keep)
