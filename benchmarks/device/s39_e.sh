#!/usr/bin/env bash
# Session 39, call e (H200): this family's stream-K (pure: each of the grid's clusters takes an equal share of all
# (tile, K block) iterations) on the six M-residue GEMMs that lose, whose cuBLAS kernels (call c) fill whole
# waves where ours leave a partial one: how far stream-K gets, against call c's records and torch.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
N=benchmarks/shapes-nsplit.json
cases=(--case $N:ns-2000x3000x1000 --case $N:ns-4608x1152x4096 --case $N:ns-2100x14336x4096
       --case $N:ns-1100x8192x4096 --case $N:ns-1300x4096x4096 --case $N:ns-3100x4096x8192)
cfgs=()
for c in '"tile_m":128,"tile_n":160' '"tile_m":128,"tile_n":192' '"tile_m":128,"tile_n":256' '"tile_m":256,"tile_n":128' \
         '"tile_m":128,"tile_n":128' '"tile_m":128,"tile_n":176' '"tile_m":128,"tile_n":256,"cluster_n":2' \
         '"tile_m":256,"tile_n":128,"cluster_m":2'; do
  cfgs+=(--config "hopper_gemm:{$c,\"stream_k\":true}")
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
    print(case, " | ".join(f"{r['short'][:30]} x{r['ratio']:.3f}" + (" (rec)" if r["label"].startswith("record") else "") for r in rs[:6]))
P
(cd "$OUT" && tar czf s39e.tar.gz keep/ && rm -rf keep)
