# Probe: ncu Speed-of-Light and memory tables of our decode128 and decode64 winners beside cuBLAS
# (is the decode GEMM DRAM- or L2-bound?). GPU machine: bash benchmarks/probes/ncu_decode.sh
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv
D128='{"tile_m":64,"tile_n":64,"tile_k":128,"cluster_m":2,"store":"direct"}'
D64='{"tile_m":64,"tile_n":128,"tile_k":128}'
for spec in "$D128 128 4096 14336" "$D64 64 28672 4096"; do
  set -- $spec
  ncu --clock-control none --launch-skip 6 --launch-count 2 --section SpeedOfLight --section MemoryWorkloadAnalysis python benchmarks/probes/ncu_probe.py "$1" $2 $3 $4 2>&1 | grep -v "^==PROF==" | grep -E "kernel|nvjet|Throughput|Duration|Frequency|Hit Rate|Busy|Bandwidth|Elapsed|max abs" 
done
