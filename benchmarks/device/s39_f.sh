#!/usr/bin/env bash
# Session 39, call f (H200): stream-K with data-parallel waves first (the kernel of s39hyb/kernel.py: the grid's
# G clusters run T // G - 1 waves of whole tiles, cluster g on tiles g, g + G, ..., then share the last one to two
# waves' tiles as (tile, K block) iterations), run from a copy of the package with that kernel. s39hyb/ held the
# two files of benchmarks/device/s39_streamk_waves.patch (kernel.py, test_gpu_kernels.py) as patched, untracked:
# git apply the patch in a worktree and copy them there to run this again.
# 1. the GPU tests of stream-K (every stream-K case of tests/test_gpu_kernels.py, three new ones of more than two
#    waves of tiles, and bitwise determinism over waves);
# 2. config_probe of stream-K configs on the six M-residue GEMMs call e probed with the pure stream-K kernel, and
#    on two few-tile ones, against torch (and call c's records, which the copy's source hash does not find).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/keep"; k=$OUT/keep
root=$PWD
h=/tmp/hybtree; rm -rf $h; mkdir -p $h
cp -r autocutlass tests benchmarks tuning_dbs pyproject.toml $h/
cp s39hyb/kernel.py $h/autocutlass/kernels/hopper_gemm/kernel.py
cp s39hyb/test_gpu_kernels.py $h/tests/test_gpu_kernels.py
cd $h
export PYTHONPATH=$h:${PYTHONPATH:-}
python -c "import autocutlass, sys; print(autocutlass.__file__)"
export AUTOCUTLASS_DB=$OUT/user.sqlite
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_kernels.py -k "stream and (2049 or 1100 or 4608 or waves)" >"$k/gpu-tests.txt" 2>&1
echo "gpu tests: rc $? $(tail -1 "$k/gpu-tests.txt")"
grep -E "^FAILED|Error:" "$k/gpu-tests.txt" | head -8 | cut -c1-250
rm -f "$OUT"/user.sqlite*
unset AUTOCUTLASS_DB
N=benchmarks/shapes-nsplit.json; O=benchmarks/shapes-online.json
cases=(--case $N:ns-2000x3000x1000 --case $N:ns-4608x1152x4096 --case $N:ns-2100x14336x4096
       --case $N:ns-1100x8192x4096 --case $N:ns-1300x4096x4096 --case $N:ns-3100x4096x8192
       --case $O:few-tiles --case $N:ns-2049x6144x4096)
cfgs=()
for c in '"tile_m":128,"tile_n":160' '"tile_m":128,"tile_n":192' '"tile_m":128,"tile_n":256' '"tile_m":256,"tile_n":128' \
         '"tile_m":128,"tile_n":128' '"tile_m":128,"tile_n":256,"cluster_n":2' '"tile_m":256,"tile_n":128,"cluster_m":2'; do
  cfgs+=(--config "hopper_gemm:{$c,\"stream_k\":true}")
done
timeout 330 python benchmarks/probes/config_probe.py --db tuning_dbs/NVIDIA-H200.sqlite --workers 15 --rounds 5 \
  "${cases[@]}" "${cfgs[@]}" --json "$k/probe.json" > "$k/probe.txt" 2>&1
echo "probe rc=$?"
grep -E "NOT VER|failed|Error" "$k/probe.txt" | cut -c1-200 | head
python - "$k/probe.json" <<'P'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
for case in dict.fromkeys(r["case"] for r in rows):
    rs = sorted((r for r in rows if r["case"] == case and r.get("verified")), key=lambda r: -r["ratio"])
    print(case, " | ".join(f"{r['short'][:30]} x{r['ratio']:.3f}" for r in rs[:5]))
P
cd "$root"
(cd "$OUT" && tar czf s39f.tar.gz keep/ && rm -rf keep)
